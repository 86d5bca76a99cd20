//! Robustness: no input makes a reader panic; arbitrary bytes, chunks with valid CRCs around
//! garbage, and valid files with flipped bytes or cut short only ever produce errors.

use std::io::Cursor;
use std::path::Path;

use proptest::prelude::*;
use storage::recordio::{
    read_chunk, read_chunk_at, FileIndex, RangeScanner, Scanner, WriterOptions,
};

use crate::support::{hand_chunk, temp_file, write_records, COMPRESSORS};

/// Runs every reader over `bytes` to the end; the only requirement is that none panics (and
/// that the readers agree with the index on how many records there are when all succeed).
fn read_everything(bytes: &[u8]) {
    let name = Path::new("fuzz.recordio");
    if let Ok(index) = FileIndex::from_reader(&mut Cursor::new(bytes), name) {
        let mut reader = Cursor::new(bytes);
        for meta in index.chunks() {
            let _ = read_chunk(&mut reader, name, meta);
        }
        for record in 0..index.record_count().min(64) {
            assert!(index.locate(record).is_some());
        }
    }
    let (_directory, path) = temp_file(bytes);
    for offset in [0, 1, 20, 25, bytes.len() as u64 / 2, bytes.len() as u64, u64::MAX] {
        let _ = read_chunk_at(&path, offset);
    }
    let scanned: Result<Vec<_>, _> =
        Scanner::open(&[path.display().to_string()]).expect("the file exists").collect();
    if let Ok(scanned) = scanned {
        let index = FileIndex::build(&path).expect("a file that scans is indexable");
        assert_eq!(scanned.len() as u64, index.record_count());
        let half = index.record_count() / 2;
        let range = RangeScanner::open(&path, half, index.record_count() - half).expect("in range");
        assert!(range.collect::<Result<Vec<_>, _>>().is_ok());
    }
}

/// A chunk with a correct header and CRC around an arbitrary payload, so the fuzzing reaches
/// decompression and record splitting instead of stopping at the CRC.
fn chunk_with_valid_crc() -> impl Strategy<Value = Vec<u8>> {
    (0u32..4, any::<u32>(), prop::collection::vec(any::<u8>(), 0..200)).prop_map(
        |(compressor, record_count, payload)| hand_chunk(compressor, record_count % 8, &payload),
    )
}

/// A valid file from random records, every compressor.
fn valid_file() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..100), 0..20),
        0usize..300,
        prop::sample::select(COMPRESSORS.to_vec()),
    )
        .prop_map(|(records, max_chunk_bytes, compressor)| {
            write_records(&records, WriterOptions { compressor, max_chunk_bytes })
        })
}

proptest! {
    /// Arbitrary bytes.
    #[test]
    fn arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2000)) {
        read_everything(&bytes);
    }

    /// Chunks whose headers and CRCs are valid but whose payloads are arbitrary.
    #[test]
    fn arbitrary_payloads(chunks in prop::collection::vec(chunk_with_valid_crc(), 1..4)) {
        read_everything(&chunks.concat());
    }

    /// Valid files with some bytes flipped and then cut at an arbitrary length.
    #[test]
    fn damaged_files(
        file in valid_file(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = file;
        if !bytes.is_empty() {
            for (position, mask) in flips {
                let position = position.index(bytes.len());
                bytes[position] ^= mask;
            }
            bytes.truncate(cut.index(bytes.len() + 1));
        }
        read_everything(&bytes);
    }
}
