//! What one dataset scan may cost the leader, counted as it goes: every directory entry, file
//! and chunk header passes through here, so a scan stops the moment it passes a cap, runs out
//! of time, or its request is dropped, and the error names the cap and the file or pattern.

use super::{
    ScanError, DATASET_FILE_COUNT_MAX, DATASET_PATH_BYTES_MAX, SCAN_ENTRY_COUNT_MAX, SCAN_MS_MAX,
};
use crate::state::{CHUNK_COUNT_MAX, CHUNK_PATH_BYTES_MAX};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The caps of one scan; production uses the named constants, tests pass small ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScanLimits {
    pub(crate) entry_count_max: u64,
    pub(crate) file_count_max: usize,
    pub(crate) path_bytes_max: usize,
    pub(crate) dataset_path_bytes_max: usize,
    pub(crate) chunk_count_max: u64,
    pub(crate) scan_ms_max: u64,
}

impl Default for ScanLimits {
    fn default() -> Self {
        Self {
            entry_count_max: SCAN_ENTRY_COUNT_MAX,
            file_count_max: DATASET_FILE_COUNT_MAX,
            path_bytes_max: CHUNK_PATH_BYTES_MAX,
            dataset_path_bytes_max: DATASET_PATH_BYTES_MAX,
            chunk_count_max: CHUNK_COUNT_MAX as u64,
            scan_ms_max: SCAN_MS_MAX,
        }
    }
}

/// A cap a dataset passed, named as the master's code names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cap {
    ChunkCount,
    FileCount,
    PathBytes,
    DatasetPathBytes,
}

impl std::fmt::Display for Cap {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str(match self {
            Cap::ChunkCount => "chunks in the dataset (CHUNK_COUNT_MAX)",
            Cap::FileCount => "files in the dataset (DATASET_FILE_COUNT_MAX)",
            Cap::PathBytes => "bytes in one file's path (CHUNK_PATH_BYTES_MAX)",
            Cap::DatasetPathBytes => "bytes in all the files' paths (DATASET_PATH_BYTES_MAX)",
        })
    }
}

/// The running counts of one scan, checked against its limits at every step.
#[derive(Debug)]
pub(crate) struct ScanBudget {
    limits: ScanLimits,
    /// Set when the request that asked for the scan is dropped (client gone, deadline passed).
    cancel: Arc<AtomicBool>,
    started: Instant,
    /// The pattern being expanded, or whose files are being indexed: errors name it.
    pub(crate) pattern: String,
    pub(crate) entry_count: u64,
    pub(crate) file_count: usize,
    pub(crate) dataset_path_bytes: usize,
    pub(crate) chunk_count: u64,
}

impl ScanBudget {
    pub(crate) fn new(limits: ScanLimits, cancel: Arc<AtomicBool>) -> Self {
        Self {
            limits,
            cancel,
            started: Instant::now(),
            pattern: String::new(),
            entry_count: 0,
            file_count: 0,
            dataset_path_bytes: 0,
            chunk_count: 0,
        }
    }

    /// Whether the scan may go on: its request is still there and its time is not up.
    pub(crate) fn check_alive(&self) -> Result<(), ScanError> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(ScanError::Cancelled);
        }
        if self.started.elapsed() >= Duration::from_millis(self.limits.scan_ms_max) {
            let limit_ms = self.limits.scan_ms_max;
            return Err(ScanError::TimeBudget { pattern: self.pattern.clone(), limit_ms });
        }
        Ok(())
    }

    /// Counts one directory entry looked at while expanding the current pattern.
    pub(crate) fn entry(&mut self) -> Result<(), ScanError> {
        self.entry_count += 1;
        if self.entry_count > self.limits.entry_count_max {
            let limit = self.limits.entry_count_max;
            return Err(ScanError::EntryLimit { pattern: self.pattern.clone(), limit });
        }
        self.check_alive()
    }

    /// Counts one file of the dataset, whose path will be stored as `path_text`.
    pub(crate) fn file(&mut self, file: &Path, path_text: &str) -> Result<(), ScanError> {
        self.file_count += 1;
        self.dataset_path_bytes += path_text.len();
        let passed = if self.file_count > self.limits.file_count_max {
            Some((Cap::FileCount, self.limits.file_count_max as u64))
        } else if path_text.len() > self.limits.path_bytes_max {
            Some((Cap::PathBytes, self.limits.path_bytes_max as u64))
        } else if self.dataset_path_bytes > self.limits.dataset_path_bytes_max {
            Some((Cap::DatasetPathBytes, self.limits.dataset_path_bytes_max as u64))
        } else {
            None
        };
        match passed {
            Some((cap, limit)) => Err(self.cap(cap, limit, file)),
            None => self.check_alive(),
        }
    }

    /// Counts one chunk header read from `file`.
    pub(crate) fn chunk(&mut self, file: &Path) -> Result<(), ScanError> {
        self.chunk_count += 1;
        if self.chunk_count > self.limits.chunk_count_max {
            return Err(self.cap(Cap::ChunkCount, self.limits.chunk_count_max, file));
        }
        self.check_alive()
    }

    fn cap(&self, cap: Cap, limit: u64, file: &Path) -> ScanError {
        ScanError::Cap { cap, limit, file: file.to_owned(), pattern: self.pattern.clone() }
    }
}
