//! Golden bytes: files written out by hand, byte by byte, as PaddlePaddle/recordio (Go) lays
//! them out, so compatibility does not rest on this crate agreeing with itself.

use std::io::Read;

use storage::recordio::{read_chunk_at, Compressor, ErrorKind, Writer, WriterOptions};

use crate::support::{records, temp_file};

/// The uncompressed payload of the records "a" and "bc": length-prefixed, little-endian.
const PAYLOAD: [u8; 11] = [1, 0, 0, 0, b'a', 2, 0, 0, 0, b'b', b'c'];

/// The header fields of a two-record chunk, as little-endian bytes.
fn header(checksum: u32, compressor: u32, compressed_size: u32) -> Vec<u8> {
    let mut bytes = vec![0x04, 0x03, 0x02, 0x01]; // magic 0x01020304, little-endian
    for field in [checksum, compressor, compressed_size, 2] {
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    bytes
}

fn write_a_bc(compressor: Compressor) -> Vec<u8> {
    let mut writer = Writer::new(Vec::new(), WriterOptions { compressor, ..Default::default() });
    writer.write_record(b"a").expect("write");
    writer.write_record(b"bc").expect("write");
    writer.finish().expect("finish")
}

/// Reads a whole file of one chunk through the public chunk reader.
fn read_file(bytes: &[u8]) -> Result<Vec<Vec<u8>>, storage::recordio::RecordIoError> {
    let (_directory, path) = temp_file(bytes);
    read_chunk_at(&path, 0)
}

/// With no compression the writer's output is fully determined: it must equal the hand-written
/// file, and the hand-written file must read back.
#[test]
fn uncompressed_file_is_byte_exact() {
    // CRC-32 (IEEE) of PAYLOAD, computed once with Python's zlib.crc32.
    let mut expected = header(0x4970_b1b1, 0, 11);
    expected.extend_from_slice(&PAYLOAD);
    assert_eq!(expected.len(), 31);
    assert_eq!(write_a_bc(Compressor::None), expected);
    assert_eq!(read_file(&expected).expect("read"), records(&["a", "bc"]));
}

/// Compressed files: the header is laid out by hand around whatever the encoder produced, the
/// CRC covers the compressed bytes, and an independent decoder recovers the hand-written payload.
#[test]
fn compressed_files_have_go_layout() {
    fn check(compressor: Compressor, code: u32, decode: fn(&[u8]) -> Vec<u8>, prefix: &[u8]) {
        let bytes = write_a_bc(compressor);
        let stored = &bytes[20..];
        let size = u32::try_from(stored.len()).expect("small");
        assert_eq!(bytes[..20], header(crc32fast::hash(stored), code, size)[..], "{compressor}");
        assert!(stored.starts_with(prefix), "{compressor}: {stored:02x?}");
        assert_eq!(decode(stored), PAYLOAD, "{compressor}");
        assert_eq!(read_file(&bytes).expect("read"), records(&["a", "bc"]));
    }
    fn unsnappy(stored: &[u8]) -> Vec<u8> {
        let mut payload = Vec::new();
        snap::read::FrameDecoder::new(stored).read_to_end(&mut payload).expect("snappy");
        payload
    }
    fn ungzip(stored: &[u8]) -> Vec<u8> {
        let mut payload = Vec::new();
        flate2::read::GzDecoder::new(stored).read_to_end(&mut payload).expect("gzip");
        payload
    }
    // The snappy framing stream identifier, then (for gzip) the gzip magic and deflate method.
    check(Compressor::Snappy, 1, unsnappy, b"\xff\x06\x00\x00sNaPpY");
    check(Compressor::Gzip, 2, ungzip, &[0x1f, 0x8b, 0x08]);
}

/// A snappy-framed payload holding an *uncompressed* framing chunk, as Go's buffered snappy
/// writer emits for small or incompressible input, is readable; a wrong CRC-32C inside the
/// framing is a decompression error.
#[test]
fn hand_built_snappy_framing_is_readable() {
    let mut framed = vec![0xff, 0x06, 0x00, 0x00, b's', b'N', b'a', b'P', b'p', b'Y'];
    // Chunk type 0x01 (uncompressed data), length 15 = 4 checksum bytes + 11 payload bytes.
    framed.extend_from_slice(&[0x01, 0x0f, 0x00, 0x00]);
    // The masked CRC-32C of PAYLOAD: crc32c = 0x1c8c3c8b, masked ((c >> 15 | c << 17) +
    // 0xa282ead8) = 0x1b9923f0, computed once with a bitwise CRC-32C in Python.
    framed.extend_from_slice(&0x1b99_23f0_u32.to_le_bytes());
    framed.extend_from_slice(&PAYLOAD);
    // CRC-32 (IEEE) of the 29 framed bytes, computed once with Python's zlib.crc32.
    let mut file = header(0x55d0_9c55, 1, 29);
    file.extend_from_slice(&framed);
    assert_eq!(read_file(&file).expect("read"), records(&["a", "bc"]));

    framed[14] ^= 0x01; // Corrupt the inner CRC-32C and recompute the outer CRC to match.
    let mut file = header(crc32fast::hash(&framed), 1, 29);
    file.extend_from_slice(&framed);
    let error = read_file(&file).expect_err("bad framing checksum");
    assert!(matches!(error.kind, ErrorKind::Decompress(_)), "{error}");
}

/// A gzip payload built by hand with a stored (uncompressed) deflate block, as any RFC 1952
/// writer may produce, is readable.
#[test]
fn hand_built_gzip_is_readable() {
    let mut gzip = vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff]; // magic, deflate, no flags
    gzip.extend_from_slice(&[0x01, 0x0b, 0x00, 0xf4, 0xff]); // final stored block, 11 bytes
    gzip.extend_from_slice(&PAYLOAD);
    gzip.extend_from_slice(&0x4970_b1b1_u32.to_le_bytes()); // CRC-32 of the payload
    gzip.extend_from_slice(&11u32.to_le_bytes()); // uncompressed size
                                                  // CRC-32 (IEEE) of the 34 gzip bytes, computed once with Python's zlib.crc32.
    let mut file = header(0x9b3c_e183, 2, 34);
    file.extend_from_slice(&gzip);
    assert_eq!(read_file(&file).expect("read"), records(&["a", "bc"]));
}
