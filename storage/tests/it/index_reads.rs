//! Indexing reads headers only: a large dataset is indexed in a few bytes per chunk.

use std::io::Cursor;
use std::path::Path;

use storage::recordio::{read_chunk, FileIndex, WriterOptions, HEADER_BYTES};

use crate::support::{write_records, CountingReader, COMPRESSORS};

/// Building the index of a file of many large chunks reads exactly one header per chunk and no
/// payload byte; reading a chunk then reads exactly that chunk.
#[test]
fn index_reads_no_payload() {
    // 64 records of 64 KiB with varied content, one per chunk.
    let records: Vec<Vec<u8>> = (0..64u32)
        .map(|seed| (0..64 * 1024u32).map(|i| (i.wrapping_mul(seed + 7) >> 3) as u8).collect())
        .collect();
    for compressor in COMPRESSORS {
        let options = WriterOptions { compressor, max_chunk_bytes: 64 * 1024 };
        let bytes = write_records(&records, options);
        let file_bytes = bytes.len() as u64;
        let mut reader = CountingReader { inner: Cursor::new(bytes), bytes_read: 0 };
        let index = FileIndex::from_reader(&mut reader, Path::new("big.recordio")).expect("index");
        assert_eq!(index.chunks().len(), records.len(), "{compressor}");
        assert_eq!(index.file_bytes(), file_bytes);
        assert_eq!(reader.bytes_read, (HEADER_BYTES * index.chunks().len()) as u64, "{compressor}");

        let meta = &index.chunks()[5];
        reader.bytes_read = 0;
        let chunk = read_chunk(&mut reader, Path::new("big.recordio"), meta).expect("read chunk");
        assert_eq!(chunk, vec![records[5].clone()]);
        let chunk_bytes = HEADER_BYTES as u64 + u64::from(meta.compressed_size);
        assert_eq!(reader.bytes_read, chunk_bytes, "{compressor}");
    }
}
