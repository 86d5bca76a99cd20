//! Restore takes the recorded checkpoint, falls back to an older file of the slot when the
//! newest is damaged or missing, and never serves zeros when none is usable.

use master::client::CheckpointMeta;
use pserver::restore::restore;
use pserver::shard::Shard;
use storage::checkpoint::{CheckpointDir, CheckpointHeader, ParamShape, WrittenCheckpoint};

use crate::support::{borrowed, layout, payloads, shard};

fn write(dir: &CheckpointDir, shard: &Shard, generation: u64) -> WrittenCheckpoint {
    let layout = shard.layout();
    let params = layout
        .params
        .iter()
        .map(|param| ParamShape { name: param.name.clone(), shape: param.shape.clone() })
        .collect();
    let header = CheckpointHeader {
        slot_index: 0,
        slot_count: layout.slot_count,
        block_elements: layout.block_elements,
        generation,
        step: shard.step(),
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

    let (restored, path) = restore(0, 2, &meta(&newer, 2)).expect("restored");
    assert_eq!(path, newer.path);
    assert_eq!(restored.pull(&[]).expect("pull"), shard.pull(&[]).expect("pull"), "bit for bit");
    assert_eq!(restored.step(), 2);

    let mut bytes = std::fs::read(&newer.path).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&newer.path, bytes).expect("damage");
    let (restored, path) = restore(0, 2, &meta(&newer, 2)).expect("fell back");
    assert_eq!(path, older.path);
    assert_eq!(restored.pull(&[]).expect("pull"), older_values);
    assert_eq!(restored.step(), 2, "the step never goes below the recorded one");

    std::fs::remove_file(&older.path).expect("remove");
    let error = format!("{:#}", restore(0, 2, &meta(&newer, 2)).expect_err("nothing usable"));
    assert!(error.contains("no usable file") && error.contains("checksum mismatch"), "{error}");
}

#[test]
fn a_file_that_is_not_the_recorded_one_is_refused_by_its_crc() {
    let temp = tempfile::tempdir().expect("temp");
    let dir = CheckpointDir::open(temp.path()).expect("open");
    let written = write(&dir, &shard(0), 4);
    let forged = CheckpointMeta { crc32: written.crc32 ^ 1, ..meta(&written, 0) };
    let error = format!("{:#}", restore(0, 2, &forged).expect_err("refused"));
    assert!(error.contains("differs from the recorded"), "{error}");
    let error = format!("{:#}", restore(0, 3, &meta(&written, 0)).expect_err("refused"));
    assert!(error.contains("this job has 3"), "{error}");
    let _ = layout();
}
