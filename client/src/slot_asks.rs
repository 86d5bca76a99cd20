//! What a heartbeat asks of a pserver slot's holder beyond keeping it: a checkpoint for a
//! progress checkpoint, or a reload for a restore with the model. The master's state builds it
//! (`JobState::slot_asks`) and the pserver acts on it.

use crate::types::CheckpointMeta;

/// What the masters ask of a slot's holder.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SlotAsks {
    /// Write a checkpoint for this progress checkpoint and record it with its id.
    pub tag_for: Option<u64>,
    /// Reload the shard from a checkpoint, then report it.
    pub reload: Option<SlotReload>,
    /// Files taken for progress checkpoints below this id are no longer needed.
    pub tags_from: u64,
}

/// A restore with the model: the holder loads `from` and reports restore `restore` done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotReload {
    pub restore: u64,
    pub from: CheckpointMeta,
}
