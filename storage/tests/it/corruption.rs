//! Every defect a file can have is a typed error naming the file and the byte offset of the
//! chunk at fault, from every reader that meets it.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use storage::recordio::{
    read_chunk, read_chunk_at, Compressor, FileIndex, RangeScanner, RecordIoError, Scanner,
    WriterOptions, CHUNK_PAYLOAD_BYTES_MAX, CHUNK_UNCOMPRESSED_BYTES_MAX, MAGIC,
};

use crate::support::{hand_chunk, records, temp_file, write_records};

/// Records "a", "bc", "def", one per chunk: chunks at bytes 0, 25 and 51, 78 bytes in all.
fn three_chunks() -> Vec<u8> {
    let options = WriterOptions { compressor: Compressor::None, max_chunk_bytes: 0 };
    let bytes = write_records(&records(&["a", "bc", "def"]), options);
    assert_eq!(bytes.len(), 78);
    bytes
}

/// The first chunk of `three_chunks` followed by `rest`, which starts at byte 25.
fn first_chunk_then(rest: &[u8]) -> Vec<u8> {
    let mut bytes = three_chunks()[..25].to_vec();
    bytes.extend_from_slice(rest);
    bytes
}

/// Where a defect is found: by indexing (headers), or only by reading the chunk (payload).
#[derive(Clone, Copy, PartialEq, Debug)]
enum Stage {
    Index,
    Chunk,
}

fn assert_error(error: &RecordIoError, path: &Path, offset: u64, expected: &str) {
    assert_eq!(error.path, path, "{error}");
    assert_eq!(error.offset, offset, "{error}");
    let kind = format!("{:?}", error.kind);
    assert!(kind.starts_with(expected), "expected {expected}, got {kind}");
    let message = error.to_string();
    assert!(message.starts_with(&format!("{}: byte {offset}: ", path.display())), "{message}");
}

/// Runs every reader over `bytes` (and a Scanner over a good file then this one) and checks
/// that each reports the defect with the right kind, path and chunk offset.
fn check(bytes: &[u8], stage: Stage, offset: u64, expected: &str) {
    let (_good_directory, good) = temp_file(&three_chunks());
    let (_directory, path) = temp_file(bytes);
    match FileIndex::build(&path) {
        Err(error) => {
            assert_eq!(stage, Stage::Index, "{error}");
            assert_error(&error, &path, offset, expected);
        }
        Ok(index) => {
            assert_eq!(stage, Stage::Chunk, "indexing should not notice a payload defect");
            let mut file = File::open(&path).expect("open");
            let failing = index.chunks().iter().position(|meta| meta.offset == offset);
            let failing = failing.expect("the failing offset is a chunk");
            for meta in &index.chunks()[..failing] {
                read_chunk(&mut file, &path, meta).expect("chunks before the defect are fine");
            }
            let error = read_chunk(&mut file, &path, &index.chunks()[failing]).expect_err("defect");
            assert_error(&error, &path, offset, expected);
        }
    }
    let error = read_chunk_at(&path, offset).expect_err("read at the failing offset");
    assert_error(&error, &path, offset, expected);

    let patterns = [good.display().to_string(), path.display().to_string()];
    let mut scanner = Scanner::open(&patterns).expect("open scanner");
    let error = scanner.find_map(Result::err).expect("the scanner meets the defect");
    assert_error(&error, &path, offset, expected);
    assert!(scanner.next().is_none(), "the scanner ends after an error");
}

/// Header defects are found by indexing; payload defects by reading the chunk.
#[test]
fn every_defect_is_located() {
    let mut bad_magic = three_chunks();
    bad_magic[25] ^= 0xff;
    check(&bad_magic, Stage::Index, 25, "BadMagic { found: 16909307 }"); // 0x010203fb

    let mut bad_crc = three_chunks();
    bad_crc[25 + 20 + 4] ^= 0x01; // "bc" becomes "cc"
    let stored = crc32fast::hash(&three_chunks()[45..51]);
    let computed = crc32fast::hash(&bad_crc[45..51]);
    let expected = format!("ChecksumMismatch {{ stored: {stored}, computed: {computed} }}");
    check(&bad_crc, Stage::Chunk, 25, &expected);

    let mut bad_compressor = three_chunks();
    bad_compressor[51 + 8] = 7;
    check(&bad_compressor, Stage::Index, 51, "UnknownCompressor { code: 7 }");

    check(&three_chunks()[..35], Stage::Index, 25, "TruncatedHeader { available: 10 }");
    let truncated_payload = &three_chunks()[..48];
    check(truncated_payload, Stage::Index, 25, "TruncatedPayload { expected: 6, available: 3 }");

    let overrun = first_chunk_then(&hand_chunk(0, 1, &[10, 0, 0, 0, b'x', b'y']));
    check(&overrun, Stage::Chunk, 25, "RecordOverrun { record: 0, length: 10, remaining: 2 }");
    let second_overruns = first_chunk_then(&hand_chunk(0, 2, &[0, 0, 0, 0, 1, 0]));
    let expected = "RecordOverrun { record: 1, length: 4, remaining: 2 }";
    check(&second_overruns, Stage::Chunk, 25, expected);

    let two_records = [1, 0, 0, 0, b'x', 0, 0, 0, 0];
    let miscounted = first_chunk_then(&hand_chunk(0, 3, &two_records));
    check(&miscounted, Stage::Chunk, 25, "RecordCountMismatch { header: 3, found: 2 }");

    let mut huge_header = Vec::new();
    for field in [MAGIC, 0, 0, u32::MAX, 1] {
        huge_header.extend_from_slice(&field.to_le_bytes());
    }
    let expected =
        format!("ChunkTooLarge {{ size: {}, limit: {CHUNK_PAYLOAD_BYTES_MAX} }}", u32::MAX);
    check(&first_chunk_then(&huge_header), Stage::Index, 25, &expected);

    let not_gzip = first_chunk_then(&hand_chunk(2, 1, b"not gzip at all"));
    check(&not_gzip, Stage::Chunk, 25, "Decompress(");
    let not_snappy = first_chunk_then(&hand_chunk(1, 1, b"not snappy"));
    check(&not_snappy, Stage::Chunk, 25, "Decompress(");
}

/// A gzip payload that expands past the uncompressed chunk limit (a decompression bomb) is a
/// ChunkTooLarge error after at most limit + 1 bytes, not an out-of-memory abort.
#[test]
fn decompression_bomb_is_refused() {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..CHUNK_UNCOMPRESSED_BYTES_MAX >> 20 {
        encoder.write_all(&zeros).expect("compress in memory");
    }
    encoder.write_all(&[0]).expect("compress in memory");
    let bomb = encoder.finish().expect("finish");
    assert!(bomb.len() < 1 << 20, "the bomb is small on disk: {} bytes", bomb.len());
    let bytes = first_chunk_then(&hand_chunk(2, 1, &bomb));
    let (_directory, path) = temp_file(&bytes);
    let error = read_chunk_at(&path, 25).expect_err("bomb");
    let limit = CHUNK_UNCOMPRESSED_BYTES_MAX as u64;
    let expected = format!("ChunkTooLarge {{ size: {}, limit: {limit} }}", limit + 1);
    assert_error(&error, &path, 25, &expected);
}

/// A chunk whose header changed after the file was indexed is refused rather than read with
/// the index's stale view of it.
#[test]
fn stale_index_is_detected() {
    let (_directory, path) = temp_file(&three_chunks());
    let index = FileIndex::build(&path).expect("index");
    let mut changed = three_chunks();
    changed[25 + 16] = 2; // The second chunk's record count.
    std::fs::write(&path, &changed).expect("rewrite");
    let mut file = File::open(&path).expect("open");
    let error = read_chunk(&mut file, &path, &index.chunks()[1]).expect_err("stale");
    let expected = "IndexMismatch { field: \"record count\", indexed: 1, found: 2 }";
    assert_error(&error, &path, 25, expected);
}

/// Missing files and out-of-range requests are errors naming the file.
#[test]
fn missing_file_and_bad_range() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let missing = directory.path().join("missing.recordio");
    assert_error(&FileIndex::build(&missing).expect_err("missing"), &missing, 0, "Io(");
    assert_error(&read_chunk_at(&missing, 25).expect_err("missing"), &missing, 25, "Io(");
    let error = RangeScanner::open(&missing, 0, 1).expect_err("missing");
    assert_error(&error, &missing, 0, "Io(");

    let (_directory, path) = temp_file(&three_chunks());
    let error = RangeScanner::open(&path, 2, 2).expect_err("past the end");
    let expected = "RangeOutOfBounds { start: 2, count: 2, record_count: 3 }";
    assert_error(&error, &path, 0, expected);
    let error = RangeScanner::open(&path, u64::MAX, 2).expect_err("overflowing range");
    assert_error(&error, &path, 0, "RangeOutOfBounds");
}
