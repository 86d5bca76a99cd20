//! What a simulated slot holder does of what heartbeats ask, as the production checkpoint
//! loop does (`pserver::checkpointer::Checkpointer::follow_asks`), without files: a reload
//! for a restore first (its shard replaced by one loaded for that restore, then reported on
//! every ask, as production reports it), else a checkpoint record for a progress checkpoint
//! (a path in the progress directory of its incarnation's job directory). Woken by the
//! production `HeldSlot` whenever a heartbeat asks for work.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use client::{CheckpointMeta, ClientError, SlotLease, SlotReload};
use pserver::checkpointer::progress_dir_name;
use pserver::held_slot::HeldSlot;
use pserver::job_dir::job_checkpoint_dir;
use pserver::shard_cell::ShardCell;

use crate::client::ClientContext;
use crate::data_plane::SimDataPlane;
use crate::recorded_master::RecordedMaster;

/// One served slot's holder, following its heartbeats' asks.
pub struct AskFollower {
    pub pserver: u64,
    pub master: Arc<RecordedMaster>,
    pub context: ClientContext,
    pub plane: Arc<SimDataPlane>,
    pub held: Arc<HeldSlot>,
    pub lease: SlotLease,
    pub cell: Arc<ShardCell>,
    /// The restore the serving shard was loaded for (the data plane's ground truth).
    pub loaded_for: Arc<AtomicU64>,
    /// The newest progress checkpoint this holder recorded a file for.
    pub tagged: u64,
}

impl AskFollower {
    /// Follows asks until the task is aborted (the holder crashed or lost its slot).
    pub async fn run(mut self) {
        loop {
            self.held.wait_asked().await;
            let asks = self.held.asks();
            if let Some(reload) = asks.reload {
                self.reload(reload).await;
            } else if let Some(progress) = asks.tag_for.filter(|id| *id > self.tagged) {
                self.tag(progress).await;
            }
        }
    }

    /// Serves a shard loaded for `reload`'s restore (once per restore), and reports it.
    async fn reload(&mut self, reload: SlotReload) {
        let slot = self.held.slot();
        if reload.restore > self.loaded_for.load(Ordering::SeqCst) {
            if self.held.check().is_err() {
                return;
            }
            match self.plane.shard(slot, reload.restore) {
                Ok(shard) => self.cell.replace(shard),
                Err(error) => return self.record(format!("reload of slot {slot}: {error:#}")),
            }
            self.loaded_for.store(reload.restore, Ordering::SeqCst);
            self.record(format!("reloaded slot {slot} for restore {}", reload.restore));
        }
        match self.master.report_reloaded(&self.lease, reload.restore).await {
            Err(ClientError::NotHolder { message, .. }) => {
                self.held.lose(format!("the master refused a reload report: {message}"))
            }
            Err(error) => self.record(format!("report of slot {slot}'s reload: {error}")),
            Ok(()) => {}
        }
    }

    /// Records a file of the shard's step for progress checkpoint `progress`.
    async fn tag(&mut self, progress: u64) {
        let (slot, generation, step) =
            (self.held.slot(), self.held.generation(), self.held.step_seen());
        let dir = job_checkpoint_dir(Path::new("ckpt"), self.lease.job_id, &self.context.job);
        let name = storage::checkpoint::file_name(slot, step, generation);
        let path = dir.join(progress_dir_name(progress)).join(name);
        let path = path.to_string_lossy().into_owned();
        let created_ms = self.context.trace.now_ms();
        let meta = CheckpointMeta { path, step, crc32: 0, created_ms };
        match self.master.tag_checkpoint(&self.lease, progress, &meta).await {
            Ok(_) => self.tagged = progress,
            Err(ClientError::NotHolder { message, .. }) => {
                self.held.lose(format!("the master refused a checkpoint record: {message}"))
            }
            Err(error) => self.record(format!("slot {slot}'s file for {progress}: {error}")),
        }
    }

    fn record(&self, line: String) {
        self.context.trace.record(format!("pserver {} {line}", self.pserver));
    }
}
