//! Snapshot files in `<data_dir>/snapshots/`: a 20-byte header (magic, crc32 of the body,
//! body length, little-endian), then the gzip of bincode {snapshot meta, state bytes}.
//! The same bytes are what a leader sends to a follower that needs the snapshot.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use openraft::{BasicNode, SnapshotMeta};
use serde::{Deserialize, Serialize};

use crate::codec;
use crate::error::StartError;

const MAGIC: [u8; 8] = *b"RTSNAP01";
const HEADER_BYTES: usize = 20;
/// Neither a snapshot file nor its decompressed contents may exceed this.
pub const SNAPSHOT_BYTES_MAX: u64 = codec::DECODED_BYTES_MAX;
/// Room between [`SNAPSHOT_BYTES_MAX`] and the largest application state: the meta (log id,
/// membership with a few addresses: well under 64 KiB), bincode's length prefixes, the file
/// header, and gzip's worst case on incompressible bytes (zlib's `compressBound`: `n/4096 +
/// n/16384 + 13` extra, 80 KiB at 256 MiB).
const SNAPSHOT_OVERHEAD_BYTES_MAX: u64 = 1024 * 1024;
/// The largest `StateMachine::snapshot()` the consensus layer guarantees to build, store, send
/// and install: its file and its decoded contents both stay within [`SNAPSHOT_BYTES_MAX`]. A
/// bigger one is not built (see `StateMachineStore`); an application should assert its own
/// bound against this.
pub const STATE_SNAPSHOT_BYTES_MAX: usize =
    (SNAPSHOT_BYTES_MAX - SNAPSHOT_OVERHEAD_BYTES_MAX) as usize;

// gzip's worst case on the largest state, plus meta room, fits the file limit.
const _: () = {
    let state = STATE_SNAPSHOT_BYTES_MAX as u64;
    let gzip_worst = state + state / 4096 + state / 16384 + 13 + 64;
    assert!(gzip_worst + 64 * 1024 + HEADER_BYTES as u64 <= SNAPSHOT_BYTES_MAX);
};
/// The newest files kept; older ones are deleted after a new one is renamed into place.
const SNAPSHOT_FILES_KEPT: usize = 2;
const FILE_PREFIX: &str = "snapshot-";
const FILE_SUFFIX: &str = ".snap";

/// What a snapshot file holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotContents {
    /// Last applied log id, last membership and snapshot id.
    pub meta: SnapshotMeta<u64, BasicNode>,
    /// `StateMachine::snapshot()` at that log id.
    pub state: Vec<u8>,
}

impl SnapshotContents {
    /// The file bytes: header, then gzip of bincode.
    pub fn encode(&self) -> io::Result<Vec<u8>> {
        let plain = codec::encode(self).map_err(io::Error::other)?;
        let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&plain)?;
        let body = encoder.finish()?;
        let mut bytes = Vec::with_capacity(HEADER_BYTES + body.len());
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
        bytes.extend_from_slice(&body);
        Ok(bytes)
    }

    /// Checks and decodes file bytes; the error says what is wrong.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        if bytes.len() < HEADER_BYTES {
            return Err(format!(
                "{} bytes is shorter than the {HEADER_BYTES}-byte header",
                bytes.len()
            ));
        }
        let (header, body) = bytes.split_at(HEADER_BYTES);
        if header[..8] != MAGIC {
            return Err("bad magic: not a raftrain snapshot".to_string());
        }
        let crc = u32::from_le_bytes(header[8..12].try_into().expect("the slice is 4 bytes"));
        let length = u64::from_le_bytes(header[12..20].try_into().expect("the slice is 8 bytes"));
        if length != body.len() as u64 {
            return Err(format!("header says {length} body bytes, the file has {}", body.len()));
        }
        let actual = crc32fast::hash(body);
        if actual != crc {
            return Err(format!("checksum mismatch: header {crc:#010x}, body {actual:#010x}"));
        }
        let mut plain = Vec::new();
        let mut decoder = GzDecoder::new(body).take(SNAPSHOT_BYTES_MAX + 1);
        decoder.read_to_end(&mut plain).map_err(|error| format!("gzip: {error}"))?;
        if plain.len() as u64 > SNAPSHOT_BYTES_MAX {
            return Err(format!("decompresses to more than {SNAPSHOT_BYTES_MAX} bytes"));
        }
        codec::decode(&plain).map_err(|error| format!("contents do not decode: {error}"))
    }
}

/// The directory of snapshot files.
#[derive(Clone, Debug)]
pub struct SnapshotDir {
    dir: PathBuf,
}

impl SnapshotDir {
    /// Opens (or creates) the directory and removes temp files left by a crash mid-write.
    pub fn open(dir: &Path) -> Result<Self, StartError> {
        let failed = |source| StartError::Directory { path: dir.to_path_buf(), source };
        fs::create_dir_all(dir).map_err(failed)?;
        let snapshots = Self { dir: dir.to_path_buf() };
        for path in storage::durable_file::remove_temp_files(dir, FILE_PREFIX).map_err(failed)? {
            tracing::info!(path = %path.display(), "removed a snapshot left half-written by a crash");
        }
        Ok(snapshots)
    }

    /// The newest snapshot file: its path, contents and bytes. A file that does not check or decode is
    /// corruption, not a reason to fall back to an older one.
    pub fn load_newest(&self) -> Result<Option<(PathBuf, SnapshotContents, Vec<u8>)>, StartError> {
        let failed = |source| StartError::Directory { path: self.dir.clone(), source };
        let Some(path) = self.list(FILE_SUFFIX).map_err(failed)?.pop() else {
            return Ok(None);
        };
        let unusable = |reason: String| StartError::Snapshot { path: path.clone(), reason };
        let length = fs::metadata(&path).map_err(|error| unusable(error.to_string()))?.len();
        if length > SNAPSHOT_BYTES_MAX {
            return Err(unusable(format!("{length} bytes is over {SNAPSHOT_BYTES_MAX}")));
        }
        let bytes = fs::read(&path).map_err(|error| unusable(error.to_string()))?;
        let contents = SnapshotContents::decode(&bytes).map_err(unusable)?;
        Ok(Some((path, contents, bytes)))
    }

    /// Writes a snapshot durably (temp file, fsync, rename, fsync directory), then deletes
    /// all but the newest files.
    pub fn write(&self, meta: &SnapshotMeta<u64, BasicNode>, bytes: &[u8]) -> io::Result<PathBuf> {
        let (index, term) = meta.last_log_id.map_or((0, 0), |id| (id.index, id.leader_id.term));
        let name = format!("{FILE_PREFIX}{index:020}-{term:020}{FILE_SUFFIX}");
        let path = self.dir.join(&name);
        storage::durable_file::write_durably(&self.dir, &name, bytes)?;
        let files = self.list(FILE_SUFFIX)?;
        let old_count = files.len().saturating_sub(SNAPSHOT_FILES_KEPT);
        for old in &files[..old_count] {
            // Already gone is what deleting wanted; only a real failure is an error.
            match fs::remove_file(old) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                _ => {}
            }
        }
        Ok(path)
    }

    /// Files with this suffix, oldest first (names sort by log index).
    fn list(&self, suffix: &str) -> io::Result<Vec<PathBuf>> {
        let mut paths = Vec::new();
        for item in fs::read_dir(&self.dir)? {
            let name = item?.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(FILE_PREFIX) && name.ends_with(suffix) {
                paths.push(self.dir.join(name.as_ref()));
            }
        }
        paths.sort();
        Ok(paths)
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, LogId, StoredMembership};

    use super::*;

    fn contents() -> SnapshotContents {
        let last_log_id = Some(LogId::new(CommittedLeaderId::new(3, 1), 42));
        let meta = SnapshotMeta {
            last_log_id,
            last_membership: StoredMembership::default(),
            snapshot_id: "3-42-x".to_string(),
        };
        SnapshotContents { meta, state: b"state bytes".to_vec() }
    }

    fn check(damage: impl Fn(&mut Vec<u8>), expected: Result<(), &str>) {
        let mut bytes = contents().encode().expect("a snapshot encodes");
        damage(&mut bytes);
        match (SnapshotContents::decode(&bytes), expected) {
            (Ok(decoded), Ok(())) => assert_eq!(decoded, contents()),
            (Err(reason), Err(want)) => assert!(reason.contains(want), "{reason} lacks {want}"),
            (actual, expected) => panic!("got {actual:?}, expected {expected:?}"),
        }
    }

    /// A file round-trips; every kind of damage is detected and named, never decoded.
    #[test]
    fn detects_damage() {
        check(|_| {}, Ok(()));
        check(|bytes| bytes.truncate(10), Err("shorter than"));
        check(|bytes| bytes[0] ^= 1, Err("bad magic"));
        check(|bytes| bytes.push(0), Err("body bytes"));
        check(|bytes| bytes.truncate(bytes.len() - 1), Err("body bytes"));
        check(|bytes| *bytes.last_mut().expect("not empty") ^= 1, Err("checksum"));
        check(
            |bytes| {
                // A valid header around a body that is not gzip.
                let body = b"not gzip at all".to_vec();
                bytes.truncate(HEADER_BYTES);
                bytes[8..12].copy_from_slice(&crc32fast::hash(&body).to_le_bytes());
                bytes[12..20].copy_from_slice(&(body.len() as u64).to_le_bytes());
                bytes.extend_from_slice(&body);
            },
            Err("gzip"),
        );
    }
}
