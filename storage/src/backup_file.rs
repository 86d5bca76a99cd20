//! The file `raftrain snapshot save` writes: a 48-byte little-endian header (magic, format
//! version, the applied index, its term, the group's feature level, the state's byte length,
//! CRC32 of the state, CRC32 of the header's first 44 bytes) and then the state bytes exactly
//! as the masters encode them. Written whole or not at all (`FILE.PID-N.tmp`, fsync, rename,
//! fsync of the directory: saves to one file at once each write theirs whole, the last stays); read back only after the magic, version, header checksum, length and
//! state checksum check, each refusal naming the file and where. Format version 1 (a 44-byte
//! header without its own checksum) is still read.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::durable_file::DurableFile;

/// The first eight bytes of every backup file.
pub const MAGIC: [u8; 8] = *b"RTBACKUP";
/// The layout of this header; a reader refuses any other.
pub const FORMAT_VERSION: u32 = 2;
/// magic 8, version 4, index 8, term 8, feature level 4, length 8, checksum 4, and (from
/// version 2) the header's checksum 4.
pub const HEADER_BYTES: usize = 48;
/// The header of format version 1: without its own checksum.
const HEADER_BYTES_V1: usize = 44;
/// Where the header's own checksum is, and what it covers (`..HEADER_CHECKED`).
const HEADER_CHECKED: usize = 44;
/// The largest state a backup holds: the consensus layer's largest decoded snapshot
/// (256 MiB), above the master's largest admitted state (160 MiB).
pub const STATE_BYTES_MAX: u64 = 256 * 1024 * 1024;

/// What the header says about the state after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackupHeader {
    /// The index of the last entry the state holds (committed).
    pub index: u64,
    /// The term of that entry.
    pub term: u64,
    /// The group's feature level in that state.
    pub feature_level: u32,
    /// The state's length in bytes.
    pub length: u64,
    /// CRC32 (IEEE) of the state bytes.
    pub checksum: u32,
}

impl std::fmt::Display for BackupHeader {
    /// `index 40 (term 3, feature level 2): 1234 bytes, crc32 0x0a1b2c3d`.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            formatter,
            "index {} (term {}, feature level {}): {} bytes, crc32 {:#010x}",
            self.index, self.term, self.feature_level, self.length, self.checksum
        )
    }
}

/// Why a backup file cannot be written or read; each names the file and the field or offset.
#[derive(Debug, thiserror::Error)]
pub enum BackupFileError {
    // Not a `source`: the message says it already, and a chain printed whole would twice.
    #[error("{path}: {error}")]
    Io { path: PathBuf, error: io::Error },
    #[error("{path}: truncated: {length} bytes, shorter than the {header}-byte header")]
    ShortHeader { path: PathBuf, length: u64, header: usize },
    #[error("{path}: bad magic at offset 0: not a raftrain backup")]
    BadMagic { path: PathBuf },
    #[error(
        "{path}: format version {version} at offset 8; this build reads 1 to {FORMAT_VERSION}"
    )]
    Version { path: PathBuf, version: u32 },
    #[error(
        "{path}: header checksum mismatch over bytes 0..{HEADER_CHECKED}: offset \
         {HEADER_CHECKED} says {expected:#010x}, the bytes give {actual:#010x}"
    )]
    HeaderChecksum { path: PathBuf, expected: u32, actual: u32 },
    #[error(
        "{path}: the header's length (offset 32) says {length} state bytes, over {STATE_BYTES_MAX}"
    )]
    TooLarge { path: PathBuf, length: u64 },
    #[error(
        "{path}: truncated or extended: the header's length (offset 32) says {expected} state \
         bytes after offset {header}, the file has {actual}"
    )]
    Length { path: PathBuf, header: usize, expected: u64, actual: u64 },
    #[error(
        "{path}: checksum mismatch over bytes {header}..{end}: the header (offset 40) \
         says {expected:#010x}, the bytes give {actual:#010x}"
    )]
    Checksum { path: PathBuf, header: usize, end: u64, expected: u32, actual: u32 },
}

/// CRC32 (IEEE) of a state, as the header and the save RPC carry it.
pub fn checksum(state: &[u8]) -> u32 {
    crc32fast::hash(state)
}

impl BackupHeader {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut bytes = [0u8; HEADER_BYTES];
        bytes[..8].copy_from_slice(&MAGIC);
        bytes[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        bytes[12..20].copy_from_slice(&self.index.to_le_bytes());
        bytes[20..28].copy_from_slice(&self.term.to_le_bytes());
        bytes[28..32].copy_from_slice(&self.feature_level.to_le_bytes());
        bytes[32..40].copy_from_slice(&self.length.to_le_bytes());
        bytes[40..44].copy_from_slice(&self.checksum.to_le_bytes());
        let own = crc32fast::hash(&bytes[..HEADER_CHECKED]);
        bytes[HEADER_CHECKED..HEADER_BYTES].copy_from_slice(&own.to_le_bytes());
        bytes
    }

    /// The header's length for the format version in `start` (its first 12 bytes), checking
    /// the magic and the version.
    fn length_for(path: &Path, start: &[u8; 12]) -> Result<usize, BackupFileError> {
        if start[..8] != MAGIC {
            return Err(BackupFileError::BadMagic { path: path.to_path_buf() });
        }
        match u32::from_le_bytes([start[8], start[9], start[10], start[11]]) {
            1 => Ok(HEADER_BYTES_V1),
            FORMAT_VERSION => Ok(HEADER_BYTES),
            version => Err(BackupFileError::Version { path: path.to_path_buf(), version }),
        }
    }

    /// Reads a header of [`BackupHeader::length_for`]'s length, checking its own checksum
    /// (from version 2) and its length bound.
    fn decode(path: &Path, bytes: &[u8]) -> Result<Self, BackupFileError> {
        let path = path.to_path_buf();
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        if bytes.len() == HEADER_BYTES {
            let (expected, actual) =
                (u32_at(HEADER_CHECKED), crc32fast::hash(&bytes[..HEADER_CHECKED]));
            if expected != actual {
                return Err(BackupFileError::HeaderChecksum { path, expected, actual });
            }
        }
        let length = u64_at(32);
        if length > STATE_BYTES_MAX {
            return Err(BackupFileError::TooLarge { path, length });
        }
        Ok(Self {
            index: u64_at(12),
            term: u64_at(20),
            feature_level: u32_at(28),
            length,
            checksum: u32_at(40),
        })
    }
}

/// Writes `path` whole or not at all: the header (its length and checksum computed from
/// `state`), then `state`. Returns the header written.
pub fn write(
    path: &Path,
    index: u64,
    term: u64,
    feature_level: u32,
    state: &[u8],
) -> Result<BackupHeader, BackupFileError> {
    let failed = |error| BackupFileError::Io { path: path.to_path_buf(), error };
    let length = state.len() as u64;
    if length > STATE_BYTES_MAX {
        return Err(BackupFileError::TooLarge { path: path.to_path_buf(), length });
    }
    let header = BackupHeader { index, term, feature_level, length, checksum: checksum(state) };
    let name = path.file_name().ok_or_else(|| {
        failed(io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))
    })?;
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // A temporary name of this process's own: two saves to one file at once each write theirs
    // whole, and the last renamed stays (`FILE.tmp` alone would be removed under the other).
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let write = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = name.to_string_lossy();
    let stem = format!("{name}.{}-{write}", std::process::id());
    let mut file = DurableFile::create_as(dir, &name, &stem).map_err(failed)?;
    file.write_all(&header.encode()).map_err(failed)?;
    file.write_all(state).map_err(failed)?;
    file.commit().map_err(failed)?;
    Ok(header)
}

/// Reads and checks `path`: magic, version, length against the file's, then the checksum.
/// Returns the header and the state bytes.
pub fn read(path: &Path) -> Result<(BackupHeader, Vec<u8>), BackupFileError> {
    let failed = |error| BackupFileError::Io { path: path.to_path_buf(), error };
    let file_length = fs::metadata(path).map_err(failed)?.len();
    let short =
        |header| BackupFileError::ShortHeader { path: path.into(), length: file_length, header };
    if file_length < 12 {
        return Err(short(HEADER_BYTES));
    }
    let mut file = File::open(path).map_err(failed)?;
    let mut start = [0u8; 12];
    file.read_exact(&mut start).map_err(failed)?;
    let header_length = BackupHeader::length_for(path, &start)?;
    if file_length < header_length as u64 {
        return Err(short(header_length));
    }
    let mut header_bytes = vec![0u8; header_length];
    header_bytes[..12].copy_from_slice(&start);
    file.read_exact(&mut header_bytes[12..]).map_err(failed)?;
    let header = BackupHeader::decode(path, &header_bytes)?;
    let actual = file_length - header_length as u64;
    if actual != header.length {
        let expected = header.length;
        return Err(BackupFileError::Length {
            path: path.into(),
            header: header_length,
            expected,
            actual,
        });
    }
    let mut state = Vec::with_capacity(header.length as usize);
    file.take(header.length).read_to_end(&mut state).map_err(failed)?;
    let computed = checksum(&state);
    if computed != header.checksum {
        return Err(BackupFileError::Checksum {
            path: path.into(),
            header: header_length,
            end: file_length,
            expected: header.checksum,
            actual: computed,
        });
    }
    Ok((header, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(damage: impl Fn(&mut Vec<u8>), expected: Result<(), &str>) {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("state.backup");
        let written = write(&path, 42, 7, 2, b"state bytes").expect("a backup writes");
        let left = fs::read_dir(dir.path()).expect("the dir lists").count();
        assert_eq!(left, 1, "no temp file is left");
        let mut bytes = fs::read(&path).expect("the file reads");
        damage(&mut bytes);
        fs::write(&path, &bytes).expect("the damaged file writes");
        match (read(&path), expected) {
            (Ok((header, state)), Ok(())) => {
                assert_eq!((header, state.as_slice()), (written, b"state bytes".as_slice()))
            }
            (Err(error), Err(want)) => {
                let text = error.to_string();
                assert!(text.contains(want), "{text} lacks {want}");
                assert!(text.contains("state.backup"), "{text} names no file");
            }
            (actual, expected) => panic!("got {actual:?}, expected {expected:?}"),
        }
    }

    /// A backup round-trips; every kind of damage is refused naming the file and where.
    #[test]
    fn detects_damage() {
        check(|_| {}, Ok(()));
        check(|bytes| bytes.truncate(10), Err("shorter than the 48-byte header"));
        check(|bytes| bytes.truncate(30), Err("shorter than the 48-byte header"));
        check(|bytes| bytes[0] ^= 1, Err("bad magic at offset 0"));
        check(|bytes| bytes[8] = 9, Err("format version 9 at offset 8"));
        for (offset, field) in [(16, "index"), (24, "term"), (28, "feature level"), (40, "crc")] {
            let damaged = check_header(offset);
            assert!(
                damaged.contains("header checksum mismatch over bytes 0..44"),
                "{field}: {damaged}"
            );
        }
        check(|bytes| set_length(bytes, u64::MAX), Err("over"));
        check(|bytes| bytes.truncate(bytes.len() - 1), Err("truncated or extended"));
        check(|bytes| bytes.push(0), Err("the file has 12"));
        check(|bytes| *bytes.last_mut().expect("not empty") ^= 4, Err("checksum mismatch"));
    }

    /// Saves to one file at once each write theirs whole: every one succeeds, and the file
    /// holds one of them.
    #[test]
    fn writes_to_one_file_at_once_each_land_whole() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("same.backup");
        std::thread::scope(|scope| {
            let writers: Vec<_> = (0..6u64)
                .map(|index| {
                    let path = &path;
                    scope.spawn(move || write(path, index, 1, 2, &vec![index as u8; 100_000]))
                })
                .collect();
            for writer in writers {
                writer.join().expect("no panic").expect("each save succeeds");
            }
        });
        let (header, state) = read(&path).expect("the file is one whole backup");
        assert!(state.iter().all(|byte| u64::from(*byte) == header.index));
        assert_eq!(
            fs::read_dir(dir.path()).expect("the dir lists").count(),
            1,
            "no temp file left"
        );
    }

    /// A version 1 file (a 44-byte header without its own checksum) still reads.
    #[test]
    fn reads_format_version_1() {
        check(
            |bytes| {
                bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
                bytes.drain(HEADER_CHECKED..HEADER_BYTES);
            },
            Ok(()),
        );
        check(
            |bytes| {
                bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
                bytes.drain(HEADER_CHECKED..HEADER_BYTES);
                bytes.truncate(40);
            },
            Err("shorter than the 44-byte header"),
        );
    }

    /// The refusal of a backup whose header byte `offset` was flipped.
    fn check_header(offset: usize) -> String {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("state.backup");
        write(&path, 42, 7, 2, b"state bytes").expect("a backup writes");
        let mut bytes = fs::read(&path).expect("the file reads");
        bytes[offset] ^= 1;
        fs::write(&path, &bytes).expect("the damaged file writes");
        read(&path).expect_err("a damaged header is refused").to_string()
    }

    /// A header whose length field says `length`, its own checksum made to match.
    fn set_length(bytes: &mut [u8], length: u64) {
        bytes[32..40].copy_from_slice(&length.to_le_bytes());
        let own = crc32fast::hash(&bytes[..HEADER_CHECKED]);
        bytes[HEADER_CHECKED..HEADER_BYTES].copy_from_slice(&own.to_le_bytes());
    }
}
