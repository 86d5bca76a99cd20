//! Restore takes the recorded checkpoint, falls back to an older file of the slot when the
//! newest is damaged or missing, and never serves zeros when none is usable.

use client::CheckpointMeta;
use pserver::restore::restore;
use pserver::shard::Shard;
use storage::checkpoint::{CheckpointDir, CheckpointHeader, ParamShape, WrittenCheckpoint};

use crate::support::{borrowed, layout, payloads, shard};

fn write(dir: &CheckpointDir, shard: &Shard, generation: u64) -> WrittenCheckpoint {
    write_at(dir, shard, shard.step(), generation)
}

/// Writes `shard` as its checkpoint at `step` under `generation`.
fn write_at(dir: &CheckpointDir, shard: &Shard, step: u64, generation: u64) -> WrittenCheckpoint {
    let layout = shard.layout();
    let params = layout
        .params
        .iter()
        .map(|param| ParamShape { name: param.name.clone(), shape: param.shape.clone() })
        .collect();
    let header = CheckpointHeader {
        slot: 0,
        slot_count: layout.slot_count,
        block_elements: layout.block_elements,
        generation,
        step,
        optimizer: bincode::serialize(&layout.optimizer).expect("encode"),
        params,
    };
    let mut writer = dir.writer(&header).expect("writer");
    shard
        .visit_blocks(|id, block| {
            let slots: Vec<&[f32]> = block.slots.iter().map(Vec::as_slice).collect();
            writer.write_block(&id.name, id.index, block.updates, &block.values, &slots)
        })
        .expect("blocks");
    writer.finish().expect("finish")
}

fn meta(written: &WrittenCheckpoint, step: u64) -> CheckpointMeta {
    CheckpointMeta {
        path: written.path.display().to_string(),
        step,
        crc32: written.crc32,
        created_ms: 0,
    }
}

#[test]
fn the_recorded_checkpoint_restores_exactly_and_a_damaged_one_falls_back() {
    let temp = tempfile::tempdir().expect("temp");
    let dir = CheckpointDir::open(temp.path()).expect("open");
    let shard = shard(0);
    shard.push(&borrowed(&payloads(0, 0.5))).expect("push");
    let older = write(&dir, &shard, 1);
    let older_values = shard.pull(&[]).expect("pull");
    shard.push(&borrowed(&payloads(0, 0.5))).expect("push");
    let newer = write(&dir, &shard, 1);

    let (restored, path) = restore(0, 2, &meta(&newer, 2), &dir).expect("restored");
    assert_eq!(path, newer.path);
    assert_eq!(restored.pull(&[]).expect("pull"), shard.pull(&[]).expect("pull"), "bit for bit");
    assert_eq!(restored.step(), 2);

    let mut bytes = std::fs::read(&newer.path).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&newer.path, bytes).expect("damage");
    let (restored, path) = restore(0, 2, &meta(&newer, 2), &dir).expect("fell back");
    assert_eq!(path, older.path);
    assert_eq!(restored.pull(&[]).expect("pull"), older_values);
    assert_eq!(restored.step(), 2, "the step never goes below the recorded one");

    std::fs::remove_file(&older.path).expect("remove");
    let error = format!("{:#}", restore(0, 2, &meta(&newer, 2), &dir).expect_err("nothing usable"));
    assert!(error.contains("no usable file") && error.contains("checksum mismatch"), "{error}");
}

#[test]
fn a_file_that_is_not_the_recorded_one_is_refused_by_its_crc() {
    let temp = tempfile::tempdir().expect("temp");
    let dir = CheckpointDir::open(temp.path()).expect("open");
    let written = write(&dir, &shard(0), 4);
    let forged = CheckpointMeta { crc32: written.crc32 ^ 1, ..meta(&written, 0) };
    let error = format!("{:#}", restore(0, 2, &forged, &dir).expect_err("refused"));
    assert!(error.contains("differs from the recorded"), "{error}");
    let error = format!("{:#}", restore(0, 3, &meta(&written, 0), &dir).expect_err("refused"));
    assert!(error.contains("this job has 3"), "{error}");
    let _ = layout();
}

/// A record whose file is not there (`/nonexistent` at step 2^62, as a forged record of an
/// older build left it) falls back to the newest usable file of the slot in the pserver's own
/// checkpoint directory; a fallback never takes a file above the recorded step or generation.
#[test]
fn a_record_without_its_file_falls_back_to_the_own_directory_within_its_bounds() {
    let temp = tempfile::tempdir().expect("temp");
    let dir = CheckpointDir::open(temp.path()).expect("open");
    let shard = shard(0);
    shard.push(&borrowed(&payloads(0, 0.5))).expect("push");
    write_at(&dir, &shard, 1, 1);
    let kept = shard.pull(&[]).expect("pull");
    shard.push(&borrowed(&payloads(0, 0.5))).expect("push");
    let newest = write_at(&dir, &shard, 2, 1);
    let newest_values = shard.pull(&[]).expect("pull");
    shard.push(&borrowed(&payloads(0, 0.5))).expect("push");
    write_at(&dir, &shard, 3, 1);
    write_at(&dir, &shard, 2, 2);

    let forged =
        CheckpointMeta { path: "/nonexistent".into(), step: 1 << 62, crc32: 0, created_ms: 0 };
    let (restored, path) = restore(0, 2, &forged, &dir).expect("fell back to the own dir");
    assert_eq!(
        path.file_name(),
        temp.path().join(storage::checkpoint::file_name(0, 3, 1)).file_name()
    );
    assert_eq!(restored.step(), 1 << 62, "the step never goes below the recorded one");

    let missing = dir.path().join(storage::checkpoint::file_name(0, 2, 1));
    std::fs::remove_file(&missing).expect("remove the recorded file");
    let recorded = CheckpointMeta { path: missing.display().to_string(), ..meta(&newest, 2) };
    let (restored, path) = restore(0, 2, &recorded, &dir).expect("fell back");
    assert_eq!(
        path.file_name(),
        temp.path().join(storage::checkpoint::file_name(0, 1, 1)).file_name()
    );
    assert_eq!(
        restored.pull(&[]).expect("pull"),
        kept,
        "not step 3 nor generation 2: above the record"
    );
    assert_ne!(kept, newest_values);
}
