//! What a holder does of what heartbeats ask beyond keeping its slot (`client::SlotAsks`):
//! a checkpoint of its own for a progress checkpoint, written into a directory of that
//! progress checkpoint beside the slot's others and recorded with its id; a reload of the
//! shard from a restore's file, reported once it serves; and removing the files of progress
//! checkpoints the masters no longer keep.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use anyhow::Context as _;
use client::{CheckpointMeta, ClientError, SlotReload};
use storage::checkpoint::{read_checkpoint, CheckpointDir, WrittenCheckpoint};

use super::{name_taken, Checkpointer};

/// Progress directories are named `progress-<id>`, in the job's checkpoint directory
/// (`job_dir.rs`).
const PROGRESS_DIR_PREFIX: &str = "progress-";

/// The name of progress checkpoint `progress`'s directory in the job's checkpoint directory.
pub fn progress_dir_name(progress: u64) -> String {
    format!("{PROGRESS_DIR_PREFIX}{progress}")
}
/// How many times a holder tries to reload for one restore (once per heartbeat that asks)
/// before it gives its slot up: the restore then waits no more for it, and the next holder
/// restores from the same file at its claim (with the claim's fallbacks), or fails saying
/// why. A restore waits at most about a lease for a holder that cannot reload.
pub const RELOAD_ATTEMPTS_MAX: u32 = 3;

/// A holder that could not reload for a restore [`RELOAD_ATTEMPTS_MAX`] times: it gives its
/// slot up and exits non-zero.
#[derive(Debug, thiserror::Error)]
#[error("slot {slot} could not reload for restore {restore} in {attempts} attempts, so it gives the slot up: {reason}")]
pub struct ReloadAbandoned {
    pub slot: u32,
    pub restore: u64,
    pub attempts: u32,
    pub reason: String,
}

/// What this holder did of what was asked.
#[derive(Debug, Default)]
pub(super) struct Followed {
    /// The newest progress checkpoint this holder recorded a checkpoint for.
    tagged: u64,
    /// The restore whose file the shard was reloaded from.
    reloaded: u64,
    /// The `tags_from` of the last removal that left nothing of this slot's behind: the
    /// directory is listed again only when it moves.
    pruned_from: u64,
    /// The restore the last reload failed for, and how many times it failed.
    failed_reloads: (u64, u32),
}

/// The progress directories under `root`, with their progress checkpoint ids.
fn progress_dirs(root: &Path) -> anyhow::Result<Vec<(u64, PathBuf)>> {
    let entries = std::fs::read_dir(root).with_context(|| format!("list {}", root.display()))?;
    let mut dirs = Vec::new();
    for entry in entries {
        let path = entry.with_context(|| format!("list {}", root.display()))?.path();
        let name = path.file_name().map(|name| name.to_string_lossy().into_owned());
        let id = name.as_deref().and_then(|name| name.strip_prefix(PROGRESS_DIR_PREFIX));
        if let Some(id) = id.and_then(|id| id.parse::<u64>().ok()) {
            dirs.push((id, path));
        }
    }
    Ok(dirs)
}

impl Checkpointer {
    /// Does what the last heartbeat asked: a reload first (nothing is tagged while the model
    /// is about to change), else a checkpoint for a progress checkpoint; then removes this
    /// slot's files of progress checkpoints no longer kept.
    pub async fn follow_asks(&mut self) -> anyhow::Result<()> {
        let asks = self.held.asks();
        if let Some(reload) = asks.reload {
            return self.reload(reload).await;
        }
        if let Some(progress) = asks.tag_for.filter(|id| *id > self.followed.tagged) {
            self.tag(progress).await?;
        }
        if asks.tags_from > self.followed.pruned_from {
            self.prune_tags(asks.tags_from)?;
        }
        Ok(())
    }

    /// Loads the shard from the restore's file (once per restore) and reports it served. A
    /// load that fails is reported with its reason and tried again at the next ask, at most
    /// [`RELOAD_ATTEMPTS_MAX`] times in all.
    async fn reload(&mut self, reload: SlotReload) -> anyhow::Result<()> {
        if reload.restore > self.followed.reloaded {
            if let Err(error) = self.load_for(&reload).await {
                return Err(self.reload_failed(&reload, error).await);
            }
        }
        match self.master.report_reloaded(&self.lease, reload.restore).await {
            Err(ClientError::NotHolder { message, .. }) => {
                self.held.lose(format!("the master refused a reload report: {message}"));
                Err(anyhow::anyhow!("slot {} lost: {message}", self.held.slot()))
            }
            reported => reported.context("report the reload"),
        }
    }

    /// Replaces the shard with the restore's file, or the newest usable older file of the
    /// slot (the fallbacks of a claim: `restore.rs`).
    async fn load_for(&mut self, reload: &SlotReload) -> anyhow::Result<()> {
        self.held.check()?;
        let (slot, slot_count) = (self.held.slot(), self.cell.slot_count());
        let (from, dir) = (reload.from.clone(), self.dir.clone());
        let loading = move || crate::restore::restore(slot, slot_count, &from, &dir);
        let (shard, path) = tokio::task::spawn_blocking(loading)
            .await
            .context("the checkpoint reader panicked")?
            .with_context(|| format!("reload slot {slot} from {}", reload.from.path))?;
        // The shard's step goes on from where it was, so the next file is named anew; the
        // slot's record is the restored file now.
        let step_before = self.cell.ready().map_or(0, |shard| shard.step());
        let recorded_before = self.recorded_step.load(Ordering::SeqCst);
        shard.adopt_step(step_before.max(recorded_before) + 1);
        self.cell.replace(shard.of_model_restore(reload.restore));
        self.recorded_step.store(reload.from.step, Ordering::SeqCst);
        self.followed.reloaded = reload.restore;
        tracing::info!(slot, path = %path.display(), restore = reload.restore, "shard reloaded for a restore");
        Ok(())
    }

    /// Counts a failed reload and tells the leader why; the error to return: the load's
    /// own, or [`ReloadAbandoned`] once it failed [`RELOAD_ATTEMPTS_MAX`] times.
    async fn reload_failed(&mut self, reload: &SlotReload, error: anyhow::Error) -> anyhow::Error {
        let (restore, failures) = self.followed.failed_reloads;
        let attempts = if restore == reload.restore { failures + 1 } else { 1 };
        self.followed.failed_reloads = (reload.restore, attempts);
        let reason = format!("{error:#}");
        let said = self.master.report_reload_failed(&self.lease, reload.restore, &reason).await;
        if let Err(report_error) = said {
            tracing::warn!(error = %report_error, "could not tell the masters why the reload failed");
        }
        if attempts < RELOAD_ATTEMPTS_MAX {
            return error;
        }
        let slot = self.held.slot();
        ReloadAbandoned { slot, restore: reload.restore, attempts, reason }.into()
    }

    /// Writes the shard into progress checkpoint `progress`'s directory and records it with
    /// the id. Nothing before the shard serves (an initializer has not finished).
    async fn tag(&mut self, progress: u64) -> anyhow::Result<()> {
        let Ok(shard) = self.cell.ready() else { return Ok(()) };
        self.held.check()?;
        let dir = self.progress_dir(progress)?;
        let step = shard.step();
        let written = match self.write(&dir, shard, step).await {
            Err(error) if name_taken(&error) => self.written_before(&dir, step)?,
            written => written?,
        };
        let path = written.path.to_string_lossy().into_owned();
        let created_ms = self.held.clock().wall_ms();
        let meta = CheckpointMeta { path, step, crc32: written.crc32, created_ms };
        match self.master.tag_checkpoint(&self.lease, progress, &meta).await {
            Ok(_) => {
                self.followed.tagged = progress;
                tracing::info!(
                    slot = self.held.slot(),
                    progress,
                    step,
                    "checkpoint recorded for a progress checkpoint"
                );
                Ok(())
            }
            Err(ClientError::NotHolder { message, .. }) => {
                self.held.lose(format!("the master refused a checkpoint record: {message}"));
                Err(anyhow::anyhow!("slot {} lost: {message}", self.held.slot()))
            }
            Err(error) => {
                Err(anyhow::Error::new(error).context("record the progress checkpoint's file"))
            }
        }
    }

    /// Progress checkpoint `progress`'s directory, created durably if new.
    fn progress_dir(&self, progress: u64) -> anyhow::Result<CheckpointDir> {
        let path = self.dir.path().join(progress_dir_name(progress));
        let created = !path.is_dir();
        let dir = CheckpointDir::open(&path)?;
        if created {
            sync_dir(self.dir.path())?;
        }
        Ok(dir)
    }

    /// The file an earlier attempt wrote for this step (a lost answer): the same shard state
    /// under the same generation, so the same content; its crc is read back.
    fn written_before(&self, dir: &CheckpointDir, step: u64) -> anyhow::Result<WrittenCheckpoint> {
        let name = storage::checkpoint::file_name(self.held.slot(), step, self.held.generation());
        let path = dir.path().join(name);
        let crc32 = read_checkpoint(&path)?.crc32;
        let file_bytes = std::fs::metadata(&path).map_or(0, |metadata| metadata.len());
        Ok(WrittenCheckpoint { path, crc32, file_bytes })
    }

    /// Removes this slot's files of progress checkpoints below `tags_from`, except one the
    /// slot's record may still name (at or above its recorded step), and directories left
    /// empty. Once none of this slot's is left below `tags_from`, that is remembered.
    fn prune_tags(&mut self, tags_from: u64) -> anyhow::Result<()> {
        let (slot, keep_from) = (self.held.slot(), self.recorded_step.load(Ordering::SeqCst));
        let mut kept = false;
        for (progress, path) in progress_dirs(self.dir.path())? {
            if progress >= tags_from {
                continue;
            }
            let dir = CheckpointDir::open(&path)?;
            dir.remove_below(slot, keep_from)?;
            kept |= !dir.list(slot)?.is_empty();
            // Fails while another slot's file is still there: that slot removes it.
            let _ = std::fs::remove_dir(&path);
        }
        if !kept {
            self.followed.pruned_from = tags_from;
        }
        Ok(())
    }
}

/// Makes a new entry of `dir` durable.
fn sync_dir(dir: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::open(dir).with_context(|| format!("open {}", dir.display()))?;
    file.sync_all().with_context(|| format!("sync {}", dir.display()))
}
