//! `SaveSnapshot`: an online copy of the whole state for `raftrain snapshot save`. Served only
//! by a leader after a linearizable read, so the state it sends holds every write committed
//! before the call; it names the index and term of the last entry that state holds. One save
//! at a time per master (the encoding holds a state-sized buffer): a second is refused with a
//! retryable `RESOURCE_EXHAUSTED`. Nothing is stopped: the encoding reads the applied state
//! under its read lock, as a Raft snapshot build does, and the stream sends from a copy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use client::{REFUSAL_METADATA_KEY, REFUSAL_SAVE_BUSY, SNAPSHOT_CHUNK_BYTES_MAX};
use consensus::ConsensusNode;
use proto::master as pb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use tonic::Status;

use super::status_mapping::write_error;
use crate::replicated_state::ReplicatedState;

/// The chunks a save streams.
pub(crate) type SnapshotStream = ReceiverStream<Result<pb::SnapshotChunk, Status>>;

/// How long one chunk may wait for a client that stopped reading before the save ends (and
/// frees its place and its buffer).
const CHUNK_SEND_TIMEOUT: Duration = Duration::from_secs(60);
/// Chunks encoded ahead of the client.
const CHUNKS_AHEAD: usize = 2;

// Every state the master admits fits what a client accepts.
const _: () = assert!(crate::state::SNAPSHOT_BYTES_MAX <= client::SNAPSHOT_STATE_BYTES_MAX);
const _: () = assert!(client::SNAPSHOT_STATE_BYTES_MAX == storage::backup_file::STATE_BYTES_MAX);

/// The one place for a save on this master.
#[derive(Clone, Default)]
pub(crate) struct SnapshotSaves {
    busy: Arc<AtomicBool>,
}

/// Holds the place until dropped (the stream ended or its client went away).
struct SavePlace(Arc<AtomicBool>);

impl Drop for SavePlace {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

impl SnapshotSaves {
    fn take(&self) -> Result<SavePlace, Status> {
        if self.busy.swap(true, Ordering::SeqCst) {
            let mut status = Status::resource_exhausted(
                "this master is already serving a snapshot save (one at a time); try again \
                 once it ends",
            );
            status
                .metadata_mut()
                .insert(REFUSAL_METADATA_KEY, MetadataValue::from_static(REFUSAL_SAVE_BUSY));
            return Err(status);
        }
        Ok(SavePlace(self.busy.clone()))
    }

    /// Checks leadership, takes a linearizable read of the whole state, and streams it.
    pub(crate) async fn save(
        &self,
        node: &ConsensusNode<ReplicatedState>,
    ) -> Result<SnapshotStream, Status> {
        let place = self.take()?;
        node.ensure_linearizable().await.map_err(write_error)?;
        let reader = node.clone();
        let encoded = tokio::task::spawn_blocking(move || {
            reader.read_applied_log_id(|state| {
                let state = state.state();
                (state.feature_level(), state.encode())
            })
        });
        let ((index, term), (feature_level, state)) = encoded
            .await
            .map_err(|error| Status::internal(format!("the encoding failed: {error}")))?;
        let header = pb::SnapshotHeader {
            index,
            term,
            feature_level,
            length: state.len() as u64,
            crc32: storage::backup_file::checksum(&state),
        };
        tracing::info!(index, term, bytes = state.len(), "serving a snapshot save");
        let (sender, receiver) = mpsc::channel(CHUNKS_AHEAD);
        tokio::spawn(send_chunks(sender, header, state, place));
        Ok(ReceiverStream::new(receiver))
    }
}

/// Sends the header with the first chunk, then the rest in order; ends early when the client
/// goes away or stops reading for [`CHUNK_SEND_TIMEOUT`].
async fn send_chunks(
    sender: mpsc::Sender<Result<pb::SnapshotChunk, Status>>,
    header: pb::SnapshotHeader,
    state: Vec<u8>,
    _place: SavePlace,
) {
    let state = tonic::codegen::Bytes::from(state);
    let mut header = Some(header);
    let mut start = 0;
    // An empty state is still one message, carrying the header.
    while header.is_some() || start < state.len() {
        let end = state.len().min(start + SNAPSHOT_CHUNK_BYTES_MAX);
        let chunk = pb::SnapshotChunk { header: header.take(), data: state.slice(start..end) };
        start = end;
        match tokio::time::timeout(CHUNK_SEND_TIMEOUT, sender.send(Ok(chunk))).await {
            Ok(Ok(())) => {}
            Ok(Err(_closed)) => return,
            Err(_elapsed) => {
                tracing::warn!("a snapshot save's client stopped reading; the save ends");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second save while one holds the place is refused as retryable (`save-busy`), and the place frees when the first ends.
    #[test]
    fn one_save_at_a_time() {
        let saves = SnapshotSaves::default();
        let first = saves.take().expect("the first save takes the place");
        let refused = saves.take().err().expect("a second save is refused");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        let refusal =
            refused.metadata().get(REFUSAL_METADATA_KEY).and_then(|value| value.to_str().ok());
        assert_eq!(refusal, Some(REFUSAL_SAVE_BUSY), "the client reads it as retryable");
        drop(first);
        assert!(saves.take().is_ok(), "the place frees when the first save ends");
    }
}
