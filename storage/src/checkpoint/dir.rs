//! `CheckpointDir`: the directory of checkpoint files, possibly shared by every pserver of a
//! job (names carry slot, step and generation).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::error::CheckpointError;
use super::writer::CheckpointWriter;
use super::CheckpointHeader;
use crate::durable_file::remove_stale_temp_files;

pub(crate) const FILE_PREFIX: &str = "slot-";
pub(crate) const FILE_SUFFIX: &str = ".ckpt";
/// A temporary checkpoint file nobody wrote to for this long was left by a crash. The
/// directory is shared by every pserver of a job, and a younger one may be another pserver's
/// write in progress (a checkpoint streams its blocks, so a live write's time keeps moving).
pub const TEMP_IDLE_S_MIN: u64 = 600;

/// A directory of checkpoint files.
#[derive(Clone, Debug)]
pub struct CheckpointDir {
    dir: PathBuf,
}

/// What a checkpoint's file name says.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct NameParts {
    pub(crate) slot: u32,
    pub(crate) step: u64,
    pub(crate) generation: u64,
}

impl CheckpointDir {
    /// Opens (or creates) `dir` and removes files a crash left half-written: temporary files
    /// idle for [`TEMP_IDLE_S_MIN`] (never recorded, safe to drop), not another pserver's write
    /// in progress.
    pub fn open(dir: &Path) -> Result<Self, CheckpointError> {
        fs::create_dir_all(dir).map_err(CheckpointError::io(dir))?;
        let idle = std::time::Duration::from_secs(TEMP_IDLE_S_MIN);
        remove_stale_temp_files(dir, FILE_PREFIX, idle).map_err(CheckpointError::io(dir))?;
        Ok(Self { dir: dir.to_path_buf() })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Starts a checkpoint file for `header` here.
    pub fn writer(&self, header: &CheckpointHeader) -> Result<CheckpointWriter, CheckpointError> {
        CheckpointWriter::create(&self.dir, header)
    }

    /// This slot's checkpoint files, newest (highest step, then generation) first.
    pub fn list(&self, slot: u32) -> Result<Vec<PathBuf>, CheckpointError> {
        let mut found: Vec<(NameParts, PathBuf)> =
            self.entries()?.into_iter().filter(|(parts, _)| parts.slot == slot).collect();
        found.sort_by(|a, b| b.0.cmp(&a.0));
        Ok(found.into_iter().map(|(_, path)| path).collect())
    }

    /// Deletes this slot's files with a step below `step` (already gone is fine).
    pub fn remove_below(&self, slot: u32, step: u64) -> Result<Vec<PathBuf>, CheckpointError> {
        let mut removed = Vec::new();
        for (parts, path) in self.entries()? {
            if parts.slot != slot || parts.step >= step {
                continue;
            }
            match fs::remove_file(&path) {
                Err(error) if error.kind() != io::ErrorKind::NotFound => {
                    return Err(CheckpointError::Io { path, error })
                }
                _ => removed.push(path),
            }
        }
        Ok(removed)
    }

    fn entries(&self) -> Result<Vec<(NameParts, PathBuf)>, CheckpointError> {
        let mut entries = Vec::new();
        for item in fs::read_dir(&self.dir).map_err(CheckpointError::io(&self.dir))? {
            let name = item.map_err(CheckpointError::io(&self.dir))?.file_name();
            if let Some(parts) = parse_name(&name.to_string_lossy()) {
                entries.push((parts, self.dir.join(name)));
            }
        }
        Ok(entries)
    }
}

/// `slot-00001-step-000...-gen-000....ckpt` -> its parts; anything else is not ours.
pub(crate) fn parse_name(name: &str) -> Option<NameParts> {
    let inner = name.strip_prefix(FILE_PREFIX)?.strip_suffix(FILE_SUFFIX)?;
    let mut parts = inner.split('-');
    let slot = parts.next()?.parse().ok()?;
    let step = (parts.next()? == "step").then(|| parts.next()).flatten()?.parse().ok()?;
    let generation = (parts.next()? == "gen").then(|| parts.next()).flatten()?.parse().ok()?;
    parts.next().is_none().then_some(NameParts { slot, step, generation })
}
