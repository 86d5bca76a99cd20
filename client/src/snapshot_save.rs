//! `MasterClient::save_snapshot`: the wire contract of `SaveSnapshot`, an online copy of the
//! whole replicated state from the leader, streamed in chunks and checked against its header
//! (every chunk within its bound, the total exactly the header's length) before it is handed
//! on. The checksum is the caller's to verify: the file format that carries it lives in
//! `storage::backup_file`.

use std::time::Duration;

use proto::master as pb;
use tonic::Status;

use crate::master_client::timed;
use crate::options::MESSAGE_BYTES_MAX;
use crate::{ClientError, MasterClient};

/// The most state bytes one `SnapshotChunk` carries: far below the message limit both ends
/// set, so a state of the largest size (~160 MB) travels as ~40 messages.
pub const SNAPSHOT_CHUNK_BYTES_MAX: usize = 4 << 20;
/// The largest state a save accepts (the consensus layer's largest decoded snapshot).
pub const SNAPSHOT_STATE_BYTES_MAX: u64 = 256 << 20;
/// One attempt of a save, from the request to the last chunk.
pub const SNAPSHOT_SAVE_RPC_TIMEOUT_MS: u64 = 300_000;

// A chunk and its header stay well within every message limit on the way.
const _: () = assert!(SNAPSHOT_CHUNK_BYTES_MAX + 1024 < MESSAGE_BYTES_MAX);

/// A saved state and where it stands in the group's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedSnapshot {
    /// The index of the last committed entry the state holds.
    pub index: u64,
    /// The term of that entry.
    pub term: u64,
    /// The group's feature level in the state.
    pub feature_level: u32,
    /// CRC32 (IEEE) of `state`, as the leader computed it.
    pub checksum: u32,
    /// The state, exactly as the masters encode it.
    pub state: Vec<u8>,
}

impl MasterClient {
    /// Saves the group's whole state from the leader, at a committed index it names. Retried
    /// on another leader until the client's call deadline when no leader answers; a master
    /// already serving a save answers `TryAgainLater` at once.
    pub async fn save_snapshot(&self) -> Result<SavedSnapshot, ClientError> {
        let timeout = Duration::from_millis(SNAPSHOT_SAVE_RPC_TIMEOUT_MS);
        self.call("SaveSnapshot", |mut service| async move {
            let request = timed(pb::SaveSnapshotRequest {}, timeout);
            let mut stream = service.save_snapshot(request).await?.into_inner();
            let mut saved: Option<(SavedSnapshot, u64)> = None;
            while let Some(chunk) = stream.message().await? {
                receive(&mut saved, chunk)?;
            }
            let Some((saved, length)) = saved else {
                return Err(Status::data_loss("the save ended before its header"));
            };
            if saved.state.len() as u64 != length {
                let got = saved.state.len();
                return Err(Status::data_loss(format!(
                    "the save ended after {got} of {length} state bytes"
                )));
            }
            Ok(tonic::Response::new(saved))
        })
        .await
    }
}

/// Adds one chunk to the save under way (`None` before the header), refusing what breaks the
/// contract: a first chunk without the header, a second header, an oversized chunk, more
/// bytes than the header announced.
fn receive(
    saved: &mut Option<(SavedSnapshot, u64)>,
    chunk: pb::SnapshotChunk,
) -> Result<(), Status> {
    if chunk.data.len() > SNAPSHOT_CHUNK_BYTES_MAX {
        let size = chunk.data.len();
        return Err(Status::data_loss(format!(
            "a chunk of {size} bytes is over {SNAPSHOT_CHUNK_BYTES_MAX}"
        )));
    }
    match (saved.as_mut(), chunk.header) {
        (None, Some(header)) => {
            if header.length > SNAPSHOT_STATE_BYTES_MAX {
                let length = header.length;
                return Err(Status::data_loss(format!(
                    "a state of {length} bytes is over {SNAPSHOT_STATE_BYTES_MAX}"
                )));
            }
            let mut state = Vec::with_capacity(header.length as usize);
            state.extend_from_slice(&chunk.data);
            let snapshot = SavedSnapshot {
                index: header.index,
                term: header.term,
                feature_level: header.feature_level,
                checksum: header.crc32,
                state,
            };
            *saved = Some((snapshot, header.length));
        }
        (None, None) => return Err(Status::data_loss("the first chunk carries no header")),
        (Some(_), Some(_)) => return Err(Status::data_loss("a second header in one save")),
        (Some((snapshot, _)), None) => snapshot.state.extend_from_slice(&chunk.data),
    }
    let (snapshot, length) = saved.as_ref().expect("set above");
    if snapshot.state.len() as u64 > *length {
        return Err(Status::data_loss(format!(
            "the save sent more than the {length} state bytes its header announced"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(header: Option<u64>, data: &[u8]) -> pb::SnapshotChunk {
        let header = header.map(|length| pb::SnapshotHeader {
            index: 9,
            term: 2,
            feature_level: 2,
            length,
            crc32: 0,
        });
        pb::SnapshotChunk { header, data: data.to_vec().into() }
    }

    /// A save is taken only as its header announced it; every breach of the contract is
    /// refused as data loss, never handed on.
    #[test]
    fn chunks_follow_their_header() {
        let cases: [(&str, Vec<pb::SnapshotChunk>, Option<&str>); 5] = [
            ("in order", vec![chunk(Some(4), b"ab"), chunk(None, b"cd")], None),
            ("no header", vec![chunk(None, b"ab")], Some("no header")),
            ("two headers", vec![chunk(Some(4), b"ab"), chunk(Some(4), b"")], Some("second")),
            ("too many bytes", vec![chunk(Some(1), b"ab")], Some("more than")),
            ("too large", vec![chunk(Some(SNAPSHOT_STATE_BYTES_MAX + 1), b"")], Some("over")),
        ];
        for (name, chunks, refused) in cases {
            let mut saved = None;
            let result = chunks.into_iter().try_for_each(|chunk| receive(&mut saved, chunk));
            match (result, refused) {
                (Ok(()), None) => {
                    let (snapshot, _) = saved.expect("a header arrived");
                    assert_eq!(snapshot.state, b"abcd", "{name}");
                }
                (Err(status), Some(want)) => {
                    assert!(status.message().contains(want), "{name}: {}", status.message())
                }
                (result, _) => panic!("{name}: {result:?}"),
            }
        }
    }

    /// A master busy with another save refuses as `save-busy`: retryable, and not waited out.
    #[test]
    fn a_busy_master_is_a_retryable_refusal() {
        let mut status = Status::resource_exhausted("busy");
        let refusal = tonic::metadata::MetadataValue::from_static(crate::REFUSAL_SAVE_BUSY);
        status.metadata_mut().insert(crate::REFUSAL_METADATA_KEY, refusal);
        let error = ClientError::from_status("SaveSnapshot", &status);
        assert!(matches!(error, ClientError::TryAgainLater { .. }), "{error}");
    }
}
