//! `Checkpointer`: writes the shard to a checkpoint file (temp file, fsync, a link that never
//! replaces a file, directory fsync), records it through the master with the slot generation
//! and the claim's secret, and only then deletes files older than the previous recorded one,
//! so the two newest recorded checkpoints always exist on disk.
//!
//! A file name (slot, step, generation) is used once: a master may have recorded a file whose
//! answer never arrived, with its crc. When the name is taken, or the master answers `Stale`
//! with a newer recorded step, the shard's step moves past it and the next round writes a new
//! name.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::Context as _;
use client::{CheckpointMeta, CheckpointRecorded, ClientError, MasterClient, SlotLease};
use storage::checkpoint::{
    CheckpointDir, CheckpointError, CheckpointHeader, ParamShape, WrittenCheckpoint,
};

use crate::held_slot::HeldSlot;
use crate::shard::Shard;
use crate::shard_cell::ShardCell;
use crate::slot_master::SlotMaster;

mod asks;

pub use asks::{progress_dir_name, ReloadAbandoned, RELOAD_ATTEMPTS_MAX};

/// What one checkpoint round did.
#[derive(Debug, PartialEq, Eq)]
pub enum Round {
    /// Nothing new since the last recorded checkpoint, or the shard does not serve yet.
    Skipped,
    Recorded {
        step: u64,
    },
    /// The master already has this step or a newer one (`recorded_step`); the file stays,
    /// and the shard's step moved past the recorded one.
    Stale {
        step: u64,
        recorded_step: u64,
    },
    /// A file of this step and generation was already on disk (never replaced); the shard's
    /// step moved past it.
    NameTaken {
        step: u64,
    },
}

/// The pserver's checkpoint writer.
pub struct Checkpointer {
    dir: CheckpointDir,
    master: Arc<MasterClient>,
    held: Arc<HeldSlot>,
    /// The claim: its generation and secret go with every record.
    lease: SlotLease,
    cell: Arc<ShardCell>,
    /// The step of the newest checkpoint the master recorded for this slot (shown by Status).
    recorded_step: Arc<AtomicU64>,
    /// The recorded step before that one: files below it may go.
    previous_step: u64,
    /// What this holder did of what heartbeats asked (`asks.rs`).
    followed: asks::Followed,
}

impl Checkpointer {
    pub fn new(
        dir: CheckpointDir,
        master: Arc<MasterClient>,
        held: Arc<HeldSlot>,
        lease: SlotLease,
        cell: Arc<ShardCell>,
        recorded_step: Arc<AtomicU64>,
    ) -> Self {
        let previous_step = recorded_step.load(Ordering::SeqCst);
        let followed = asks::Followed::default();
        Self { dir, master, held, lease, cell, recorded_step, previous_step, followed }
    }

    /// Tells the heartbeats the shard's step now.
    pub fn note_step(&self) {
        if let Ok(shard) = self.cell.ready() {
            self.held.saw_step(shard.step());
        }
    }

    /// Whether the slot is still this pserver's (a failed round that kept it, even with its
    /// lease unconfirmed for now, is retried later).
    pub fn holds_slot(&self) -> bool {
        !self.held.is_lost()
    }

    /// Gives the slot back (a planned shutdown, after the last round): whether it was still
    /// held under this generation. A holder the masters no longer know has nothing to give.
    pub async fn release(&self) -> anyhow::Result<bool> {
        match self.master.release_slot(&self.lease).await {
            Err(ClientError::NotHolder { .. }) => Ok(false),
            released => released.context("release the slot"),
        }
    }

    /// Writes and records one checkpoint if the shard changed since the last one.
    pub async fn round(&mut self) -> anyhow::Result<Round> {
        let Ok(shard) = self.cell.ready() else { return Ok(Round::Skipped) };
        let step = shard.step();
        self.held.saw_step(step);
        if step <= self.recorded_step.load(Ordering::SeqCst) {
            return Ok(Round::Skipped);
        }
        self.held.check()?;
        let written = match self.write(&self.dir, shard.clone(), step).await {
            Err(error) if name_taken(&error) => {
                tracing::warn!(slot = self.held.slot(), step, %error, "checkpoint name taken; moving past it");
                shard.adopt_step(step + 1);
                return Ok(Round::NameTaken { step });
            }
            written => written?,
        };
        let path = written.path.to_string_lossy().into_owned();
        let lease = &self.lease;
        match record(&*self.master, &self.held, lease, path, step, written.crc32).await? {
            CheckpointRecorded::Recorded => {
                self.recorded(step)?;
                Ok(Round::Recorded { step })
            }
            CheckpointRecorded::Stale { recorded_step } => {
                shard.adopt_step(recorded_step.saturating_add(1));
                Ok(Round::Stale { step, recorded_step })
            }
        }
    }

    /// The master recorded `step`: the files the two newest records need stay, older go.
    fn recorded(&mut self, step: u64) -> anyhow::Result<()> {
        let removed = self.dir.remove_below(self.held.slot(), self.previous_step)?;
        for path in removed {
            tracing::debug!(path = %path.display(), "removed an old checkpoint");
        }
        self.previous_step = self.recorded_step.swap(step, Ordering::SeqCst);
        tracing::info!(slot = self.held.slot(), step, "checkpoint recorded");
        Ok(())
    }

    /// Writes the shard's file for `step` into `dir` on a blocking thread; each block is copied
    /// under its lock and written without it.
    async fn write(
        &self,
        dir: &CheckpointDir,
        shard: Arc<Shard>,
        step: u64,
    ) -> anyhow::Result<WrittenCheckpoint> {
        let dir = dir.clone();
        let header = header(&shard, self.held.slot(), self.held.generation(), step)?;
        let written = tokio::task::spawn_blocking(move || -> anyhow::Result<WrittenCheckpoint> {
            let mut writer = dir.writer(&header)?;
            shard.visit_blocks(|id, block| {
                let slots: Vec<&[f32]> = block.slots.iter().map(Vec::as_slice).collect();
                writer.write_block(&id.name, id.index, block.updates, &block.values, &slots)
            })?;
            Ok(writer.finish()?)
        });
        written.await.context("the checkpoint writer panicked")?
    }
}

/// Records the checkpoint file at `path` (of `step`, with `crc32`) through the masters under
/// the claim's generation and secret, stamped with the pserver's wall clock. Nothing is
/// recorded unless the lease holds now: a pserver paused since it wrote the file may have lost
/// its slot. The master saying another generation holds the slot marks `held` lost. The record
/// step of `Checkpointer::round`, and the simulation's (which writes no files).
pub async fn record(
    master: &impl SlotMaster,
    held: &HeldSlot,
    lease: &SlotLease,
    path: String,
    step: u64,
    crc32: u32,
) -> anyhow::Result<CheckpointRecorded> {
    held.check()?;
    let created_ms = held.clock().wall_ms();
    let meta = CheckpointMeta { path, step, crc32, created_ms };
    match master.record_checkpoint(lease, &meta).await {
        Ok(recorded) => Ok(recorded),
        Err(ClientError::NotHolder { message, .. }) => {
            held.lose(format!("the master refused a checkpoint record: {message}"));
            Err(anyhow::anyhow!("slot {} lost: {message}", held.slot()))
        }
        Err(error) => {
            Err(anyhow::Error::new(error).context(format!("record checkpoint {}", meta.path)))
        }
    }
}

/// Whether a write failed only because its file name was already taken.
fn name_taken(error: &anyhow::Error) -> bool {
    matches!(error.downcast_ref::<CheckpointError>(), Some(CheckpointError::Exists { .. }))
}

/// The file header for the shard at `step` (the step the file is named and recorded with).
fn header(
    shard: &Shard,
    slot: u32,
    generation: u64,
    step: u64,
) -> anyhow::Result<CheckpointHeader> {
    let layout = shard.layout();
    let optimizer = bincode::serialize(&layout.optimizer).context("encode the optimizer")?;
    let params = layout
        .params
        .iter()
        .map(|param| ParamShape { name: param.name.clone(), shape: param.shape.clone() })
        .collect();
    Ok(CheckpointHeader {
        slot,
        slot_count: layout.slot_count,
        block_elements: layout.block_elements,
        generation,
        step,
        optimizer,
        params,
    })
}
