//! Checkpoint files: round trips, every kind of damage refused with where it is, and the
//! directory's listing and cleanup.

use super::*;

fn header(slot: u32, step: u64, generation: u64) -> CheckpointHeader {
    let params = vec![
        ParamShape { name: "w".into(), shape: vec![256, 256] },
        ParamShape { name: "b".into(), shape: vec![] },
    ];
    CheckpointHeader {
        slot,
        slot_count: 3,
        block_elements: 65_536,
        generation,
        step,
        optimizer: b"adam".to_vec(),
        params,
    }
}

fn blocks() -> Vec<CheckpointBlock> {
    let big: Vec<f32> = (0..65_536).map(|i| i as f32 * 0.5).collect();
    vec![
        CheckpointBlock {
            name: "w".into(),
            block: 0,
            updates: 9,
            values: big.clone(),
            slots: vec![big.clone(), vec![1.0; 65_536]],
        },
        CheckpointBlock {
            name: "b".into(),
            block: 0,
            updates: 0,
            values: vec![-2.5],
            slots: vec![],
        },
    ]
}

fn write(
    dir: &CheckpointDir,
    header: &CheckpointHeader,
    blocks: &[CheckpointBlock],
) -> WrittenCheckpoint {
    let mut writer = dir.writer(header).expect("writer");
    for block in blocks {
        let slots: Vec<&[f32]> = block.slots.iter().map(Vec::as_slice).collect();
        writer
            .write_block(&block.name, block.block, block.updates, &block.values, &slots)
            .expect("block");
    }
    writer.finish().expect("finish")
}

#[test]
fn a_checkpoint_reads_back_exactly() {
    let temp = tempfile::tempdir().expect("temp");
    let dir = CheckpointDir::open(temp.path()).expect("open");
    for (step, optimizer) in [(7, Vec::new()), (8, b"sgd".to_vec())] {
        let header = CheckpointHeader { optimizer, ..header(1, step, 2) };
        let written = write(&dir, &header, &blocks());
        assert_eq!(std::fs::metadata(&written.path).expect("meta").len(), written.file_bytes);
        let read = read_checkpoint(&written.path).expect("read");
        assert_eq!((read.header, read.blocks, read.crc32), (header, blocks(), written.crc32));
    }
}

/// Damages a fresh file with `damage` and expects `want` in the error.
fn check(damage: impl Fn(&mut Vec<u8>), want: &str) {
    let temp = tempfile::tempdir().expect("temp");
    let dir = CheckpointDir::open(temp.path()).expect("open");
    let written = write(&dir, &header(0, 1, 1), &blocks());
    let mut bytes = std::fs::read(&written.path).expect("read");
    damage(&mut bytes);
    std::fs::write(&written.path, &bytes).expect("write back");
    let error = read_checkpoint(&written.path).expect_err("refused").to_string();
    assert!(error.contains(want), "{error} lacks {want:?}");
    assert!(error.contains(&written.path.display().to_string()), "{error} names the file");
}

#[test]
fn damage_is_refused_saying_where() {
    check(|bytes| bytes[0] = b'X', "bad magic");
    check(|bytes| bytes[12] ^= 1, "checksum mismatch");
    check(|bytes| bytes[200_000] ^= 0x40, "checksum mismatch");
    check(
        |bytes| {
            let n = bytes.len();
            bytes[n - 10] ^= 1
        },
        "checksum mismatch",
    );
    check(
        |bytes| {
            let n = bytes.len();
            bytes[n - 1] ^= 1
        },
        "no trailer",
    );
    check(
        |bytes| {
            let n = bytes.len();
            bytes[n - 20] ^= 1
        },
        "body bytes",
    );
    check(|bytes| bytes.truncate(bytes.len() / 2), "no trailer");
    check(|bytes| bytes.truncate(10), "truncated");
    check(|bytes| bytes.extend_from_slice(b"more"), "no trailer");
}

/// A body large enough to be hashed in two halves at once reads back exactly, and damage in
/// either half, or a torn float at the seam, is refused as a checksum mismatch.
#[test]
fn a_large_checkpoint_is_hashed_in_halves_and_checked_whole() {
    let temp = tempfile::tempdir().expect("temp");
    let dir = CheckpointDir::open(temp.path()).expect("open");
    let values: Vec<f32> = (0..(6 << 20)).map(|i| i as f32 * 0.25).collect();
    let header = CheckpointHeader {
        params: vec![ParamShape { name: "w".into(), shape: vec![values.len() as u64] }],
        ..header(0, 1, 1)
    };
    let blocks: Vec<CheckpointBlock> = values
        .chunks(65_536)
        .enumerate()
        .map(|(index, part)| CheckpointBlock {
            name: "w".into(),
            block: index as u32,
            updates: 1,
            values: part.to_vec(),
            slots: vec![],
        })
        .collect();
    let written = write(&dir, &header, &blocks);
    assert!(written.file_bytes > 16 << 20, "large enough to split");
    let read = read_checkpoint(&written.path).expect("reads");
    assert_eq!((read.header, read.blocks, read.crc32), (header, blocks, written.crc32));
    // The header ("adam", one parameter "w" of rank 1) ends at body offset 61: a seam is found.
    let body = written.file_bytes - (MAGIC.len() + TRAILER_BYTES) as u64;
    let file = std::fs::File::open(&written.path).expect("open");
    let seam = super::seam::seam(&file, MAGIC.len() as u64, 61, body, body / 2);
    assert!(seam.is_some_and(|seam| seam >= body / 2 && seam < body), "{seam:?}");

    let clean = std::fs::read(&written.path).expect("read");
    let middle = clean.len() / 2;
    for at in [1_000, middle - 2, middle + 1, clean.len() - 100] {
        let mut bytes = clean.clone();
        bytes[at] ^= 0x10;
        std::fs::write(&written.path, &bytes).expect("write back");
        let error = read_checkpoint(&written.path).expect_err("refused").to_string();
        assert!(error.contains("checksum mismatch"), "byte {at}: {error}");
    }
}

#[test]
fn a_consistent_file_with_a_bad_length_is_refused_at_its_offset() {
    // A body whose crc matches but whose parameter count is absurd: the limit stops it before
    // any allocation, and the error gives the count's offset.
    let mut body = Vec::new();
    for word in [VERSION, 0, 1, 4] {
        body.extend_from_slice(&word.to_le_bytes());
    }
    body.extend_from_slice(&[0; 16]);
    body.extend_from_slice(&0_u32.to_le_bytes());
    body.extend_from_slice(&u32::MAX.to_le_bytes());
    let mut bytes = MAGIC.to_vec();
    bytes.extend_from_slice(&body);
    bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    bytes.extend_from_slice(&TRAILER_MAGIC);
    let temp = tempfile::tempdir().expect("temp");
    let path = temp.path().join("forged.ckpt");
    std::fs::write(&path, bytes).expect("write");
    let error = read_checkpoint(&path).expect_err("refused").to_string();
    assert!(error.contains("at byte 44: parameter count 4294967295 is over the limit"), "{error}");
}

#[test]
fn the_directory_lists_newest_first_and_cleans_up() {
    let temp = tempfile::tempdir().expect("temp");
    std::fs::write(temp.path().join(format!("{}.tmp", file_name(1, 99, 1))), b"half")
        .expect("leftover");
    std::fs::write(temp.path().join(format!("{}.tmp", file_name(2, 7, 1))), b"half")
        .expect("another pserver's write in progress");
    let dir = CheckpointDir::open(temp.path()).expect("open");
    assert!(dir.list(1).expect("list").is_empty(), "the leftover is not listed");
    let in_progress = temp.path().join(format!("{}.tmp", file_name(2, 7, 1)));
    assert!(in_progress.exists(), "another pserver's write in progress survives an open");
    let few = &blocks()[1..];
    let paths: Vec<_> = [(5, 1), (12, 1), (12, 3), (3, 1)]
        .iter()
        .map(|&(step, generation)| write(&dir, &header(1, step, generation), few).path)
        .collect();
    write(&dir, &header(2, 50, 1), few);
    let listed = dir.list(1).expect("list");
    assert_eq!(
        listed,
        vec![paths[2].clone(), paths[1].clone(), paths[0].clone(), paths[3].clone()]
    );
    let removed = dir.remove_below(1, 12).expect("remove");
    assert_eq!(removed.len(), 2);
    assert_eq!(dir.list(1).expect("list"), vec![paths[2].clone(), paths[1].clone()]);
    assert_eq!(dir.list(2).expect("list").len(), 1, "another slot's files stay");
}

/// A second checkpoint under a name already on disk (same slot, step and generation, other
/// contents: a round repeated after its record's answer was lost) is refused, and the first
/// file, whose crc a master may have recorded, stays byte for byte; no temporary file stays.
#[test]
fn a_checkpoint_file_is_never_replaced() {
    let temp = tempfile::tempdir().expect("temp");
    let dir = CheckpointDir::open(temp.path()).expect("open");
    let first = write(&dir, &header(1, 7, 2), &blocks());
    let before = std::fs::read(&first.path).expect("read the first file");
    let mut writer = dir.writer(&header(1, 7, 2)).expect("writer");
    writer.write_block("b", 0, 1, &[4.0], &[]).expect("block");
    let second = writer.finish();
    assert!(
        matches!(&second, Err(CheckpointError::Exists { path }) if *path == first.path),
        "{second:?}"
    );
    assert_eq!(std::fs::read(&first.path).expect("read again"), before, "never replaced");
    let names: Vec<_> = std::fs::read_dir(temp.path())
        .expect("list")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(names.len(), 1, "only the first file: {names:?}");
}
