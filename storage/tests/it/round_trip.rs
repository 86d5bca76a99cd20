//! Round trip: whatever records are written, every reader gives back exactly those records,
//! and chunks are cut exactly where the writer's rule says.

use std::fs::File;
use std::path::Path;

use proptest::prelude::*;
use storage::recordio::{
    read_chunk, read_chunk_at, ErrorKind, FileIndex, RangeScanner, Scanner, Writer, WriterOptions,
    HEADER_BYTES,
};

use crate::support::{temp_file, write_records, COMPRESSORS};

/// Records from empty to a few hundred bytes; with chunk limits down to zero this covers empty
/// files, empty records and records bigger than a whole chunk.
fn arbitrary_records() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..40)
}

/// Reads the whole file chunk by chunk, checking the index's totals against the file.
fn read_by_chunks(path: &Path, index: &FileIndex) -> Vec<Vec<Vec<u8>>> {
    let mut file = File::open(path).expect("open");
    let file_bytes = std::fs::metadata(path).expect("stat").len();
    assert_eq!(index.file_bytes(), file_bytes);
    let headers = (HEADER_BYTES * index.chunks().len()) as u64;
    assert_eq!(index.compressed_bytes() + headers, file_bytes);
    index
        .chunks()
        .iter()
        .map(|meta| {
            let records = read_chunk(&mut file, path, meta).expect("read chunk");
            assert_eq!(records.len(), meta.record_count as usize);
            let at = read_chunk_at(path, meta.offset).expect("read chunk at offset");
            assert_eq!(at, records);
            records
        })
        .collect()
}

/// A chunk holds more than one record only if they fit in `max_chunk_bytes`, and the writer
/// started a new chunk only because the next record would not fit.
fn check_chunk_boundaries(chunks: &[Vec<Vec<u8>>], max_chunk_bytes: usize) {
    let encoded =
        |records: &[Vec<u8>]| records.iter().map(|record| 4 + record.len()).sum::<usize>();
    for (chunk_index, chunk) in chunks.iter().enumerate() {
        assert!(!chunk.is_empty(), "the writer never writes an empty chunk");
        assert!(chunk.len() == 1 || encoded(chunk) <= max_chunk_bytes);
        if let Some(next) = chunks.get(chunk_index + 1) {
            assert!(encoded(chunk) + 4 + next[0].len() > max_chunk_bytes);
        }
    }
}

proptest! {
    /// Every reader returns the written records, and `locate` agrees with the model.
    #[test]
    fn round_trip(
        model in arbitrary_records(),
        max_chunk_bytes in 0usize..1024,
        compressor in prop::sample::select(COMPRESSORS.to_vec()),
        ranges in prop::collection::vec((any::<u64>(), any::<u64>()), 4),
    ) {
        let options = WriterOptions { compressor, max_chunk_bytes };
        let mut writer = Writer::new(Vec::new(), options);
        for record in &model {
            writer.write_record(record).expect("write to memory");
        }
        prop_assert_eq!(writer.records_written(), model.len() as u64);
        let chunks_written = writer.chunks_written();
        let bytes = writer.finish().expect("finish");
        prop_assert_eq!(bytes.clone(), write_records(&model, options), "writing is deterministic");
        let (_directory, path) = temp_file(&bytes);

        let scanned: Vec<Vec<u8>> = Scanner::open(&[path.display().to_string()])
            .expect("open scanner")
            .collect::<Result<_, _>>()
            .expect("scan");
        prop_assert_eq!(&scanned, &model);

        let index = FileIndex::build(&path).expect("index");
        prop_assert_eq!(index.record_count(), model.len() as u64);
        prop_assert!(index.chunks().len() as u64 >= chunks_written);
        let chunks = read_by_chunks(&path, &index);
        check_chunk_boundaries(&chunks, max_chunk_bytes);
        prop_assert_eq!(&chunks.concat(), &model);

        for (record_number, record) in model.iter().enumerate() {
            let (chunk_index, within) = index.locate(record_number as u64).expect("in range");
            prop_assert_eq!(&chunks[chunk_index][within as usize], record);
            prop_assert_eq!(index.first_record(chunk_index) + u64::from(within), record_number as u64);
        }
        prop_assert_eq!(index.locate(model.len() as u64), None);

        let total = model.len() as u64;
        for (start, count) in ranges {
            let start = start % (total + 1);
            let count = count % (total - start + 1);
            let read: Vec<Vec<u8>> = RangeScanner::open(&path, start, count)
                .expect("open range")
                .collect::<Result<_, _>>()
                .expect("read range");
            prop_assert_eq!(&read[..], &model[start as usize..(start + count) as usize]);
        }
        let past_end = RangeScanner::open(&path, total, 1).expect_err("past the end");
        let out_of_bounds = matches!(past_end.kind, ErrorKind::RangeOutOfBounds { .. });
        prop_assert!(out_of_bounds, "{}", past_end);
    }
}

/// A file with no records is empty: no header, no chunk, and every reader sees no record.
#[test]
fn empty_file() {
    for compressor in COMPRESSORS {
        let bytes = write_records(&[], WriterOptions { compressor, ..WriterOptions::default() });
        assert!(bytes.is_empty());
        let (_directory, path) = temp_file(&bytes);
        let index = FileIndex::build(&path).expect("index");
        assert_eq!((index.chunks().len(), index.record_count(), index.file_bytes()), (0, 0, 0));
        assert_eq!(index.locate(0), None);
        assert_eq!(RangeScanner::open(&path, 0, 0).expect("empty range").count(), 0);
        let pattern = path.display().to_string();
        assert_eq!(Scanner::open(&[pattern]).expect("open").count(), 0);
    }
}

/// Records too large for any chunk a reader accepts are refused before anything is written,
/// and the writer stays usable.
#[test]
fn oversized_record_refused() {
    let mut writer = Writer::new(Vec::new(), WriterOptions::default());
    let huge = vec![0u8; storage::recordio::CHUNK_UNCOMPRESSED_BYTES_MAX];
    let error = writer.write_record(&huge).expect_err("record over the chunk limit");
    assert_eq!(error.kind(), std::io::ErrorKind::InvalidInput);
    writer.write_record(b"small").expect("still usable");
    let bytes = writer.finish().expect("finish");
    let (_directory, path) = temp_file(&bytes);
    let read: Vec<_> =
        RangeScanner::whole_file(&path).expect("open").map(|r| r.expect("read")).collect();
    assert_eq!(read, vec![b"small".to_vec()]);
}
