//! Restoring a slot's shard from its checkpoints: the one the master recorded first (its crc
//! must match the record), then other files of the same slot, newest first, each with a
//! warning: beside the recorded one and in this pserver's own checkpoint directory (a record
//! whose path is gone or wrong does not make the slot unrecoverable). A fallback takes only
//! files at or below the recorded step and generation: a newer one was never recorded, and may
//! be a fenced-off holder's. Never silent zeros: when no file is usable, the error lists why
//! each was refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use client::CheckpointMeta;
use storage::checkpoint::{parse_file_name, read_checkpoint, Checkpoint, CheckpointDir};

use crate::block_state::BlockState;
use crate::layout::{JobLayout, ParamSpec};
use crate::optimizer::OptimizerConfig;
use crate::placement::BlockId;
use crate::shard::Shard;

/// Loads the newest usable checkpoint of `slot`, looking in `own_dir` too. The restored
/// shard's step is at least the recorded one, so its next checkpoint is newer than every
/// record of the slot.
pub fn restore(
    slot: u32,
    slot_count: u32,
    meta: &CheckpointMeta,
    own_dir: &CheckpointDir,
) -> anyhow::Result<(Shard, PathBuf)> {
    let recorded = PathBuf::from(&meta.path);
    let mut refusals = Vec::new();
    for (path, expected_crc) in candidates(&recorded, slot, meta, own_dir)? {
        match load(&path, slot, slot_count, expected_crc, meta.step) {
            Ok(shard) => {
                if path != recorded {
                    tracing::warn!(slot, path = %path.display(), refused = ?refusals, "restored an older checkpoint: the recorded one is unusable");
                }
                return Ok((shard, path));
            }
            Err(error) => {
                tracing::warn!(slot, path = %path.display(), %error, "checkpoint unusable");
                refusals.push(format!("{}: {error:#}", path.display()));
            }
        }
    }
    anyhow::bail!(
        "slot {slot} has a recorded checkpoint at step {} but no usable file: {}",
        meta.step,
        refusals.join("; ")
    )
}

/// The recorded file (checked against the recorded crc), then the slot's other files beside
/// it and in `own_dir`, newest first, none above the recorded step or generation.
fn candidates(
    recorded: &Path,
    slot: u32,
    meta: &CheckpointMeta,
    own_dir: &CheckpointDir,
) -> anyhow::Result<Vec<(PathBuf, Option<u32>)>> {
    // A record of an older build may name no checkpoint file: then only its step bounds.
    let recorded_generation = recorded
        .file_name()
        .and_then(|name| parse_file_name(&name.to_string_lossy()))
        .map_or(u64::MAX, |(_, _, generation)| generation);
    let mut fallbacks: Vec<((u64, u64), PathBuf)> = Vec::new();
    // The recorded file's directory is read only if it exists: a record never creates one.
    let beside = recorded.parent().filter(|dir| dir.is_dir()).map(CheckpointDir::open);
    let dirs = beside.into_iter().filter_map(Result::ok).chain(std::iter::once(own_dir.clone()));
    for dir in dirs {
        for path in dir.list(slot)? {
            let name = path.file_name().map(|name| name.to_string_lossy().into_owned());
            let Some((_, step, generation)) = name.as_deref().and_then(parse_file_name) else {
                continue;
            };
            let within = step <= meta.step && generation <= recorded_generation;
            let seen = path == recorded || fallbacks.iter().any(|(_, known)| *known == path);
            if within && !seen {
                fallbacks.push(((step, generation), path));
            }
        }
    }
    fallbacks.sort_by_key(|(parts, _)| std::cmp::Reverse(*parts));
    let mut paths = vec![(recorded.to_path_buf(), Some(meta.crc32))];
    paths.extend(fallbacks.into_iter().map(|(_, path)| (path, None)));
    Ok(paths)
}

/// The shard in the file at `path`, which must be of `slot` of `slot_count` (and carry
/// `expected_crc` if given), at a step of at least `recorded_step`.
pub(crate) fn load(
    path: &Path,
    slot: u32,
    slot_count: u32,
    expected_crc: Option<u32>,
    recorded_step: u64,
) -> anyhow::Result<Shard> {
    let checkpoint = read_checkpoint(path)?;
    let crc = checkpoint.crc32;
    if let Some(expected) = expected_crc {
        anyhow::ensure!(
            crc == expected,
            "crc {crc:#010x} differs from the recorded {expected:#010x}"
        );
    }
    let header = &checkpoint.header;
    anyhow::ensure!(header.slot == slot, "the file is for slot {}, not {slot}", header.slot);
    anyhow::ensure!(
        header.slot_count == slot_count,
        "the file is for {} slots, this job has {slot_count}",
        header.slot_count
    );
    let step = header.step.max(recorded_step);
    let (layout, blocks) = into_parts(checkpoint)?;
    Ok(Shard::new(layout, slot, step, blocks)?)
}

fn into_parts(
    checkpoint: Checkpoint,
) -> anyhow::Result<(JobLayout, BTreeMap<BlockId, BlockState>)> {
    let header = checkpoint.header;
    let optimizer: OptimizerConfig = bincode::deserialize(&header.optimizer)
        .map_err(|error| anyhow::anyhow!("the optimizer setting does not decode: {error}"))?;
    let params = header
        .params
        .into_iter()
        .map(|param| ParamSpec { name: param.name, shape: param.shape })
        .collect();
    let layout = JobLayout {
        params,
        block_elements: header.block_elements,
        slot_count: header.slot_count,
        optimizer,
    };
    layout.validate()?;
    let blocks = checkpoint
        .blocks
        .into_iter()
        .map(|block| {
            let state =
                BlockState { values: block.values, slots: block.slots, updates: block.updates };
            (BlockId { name: block.name, index: block.block }, state)
        })
        .collect();
    Ok((layout, blocks))
}
