//! One task's bookkeeping: its epoch fence and its failure counters.

use serde::{Deserialize, Serialize};

/// What the queue remembers about a task across dispatches. The task id is its index.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct Task {
    /// Bumped by every dispatch and never reset, across passes too, so a report from any earlier
    /// dispatch (a slow or partitioned trainer) can be told apart from the current one.
    pub(crate) epoch: u64,
    /// Failures reported in the current pass.
    pub(crate) failures: u32,
    /// Deadlines missed in the current pass.
    pub(crate) timeouts: u32,
    /// Why the task last failed or timed out, shown in status while it is in `failed`.
    pub(crate) last_failure: Option<String>,
}

/// A dispatched task waiting for its report.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub(crate) struct PendingTask {
    /// The epoch of this dispatch; only a report with this epoch counts.
    pub(crate) epoch: u64,
    /// The trainer the task was given to.
    pub(crate) trainer: u64,
    /// When the task was dispatched, to measure completion time.
    pub(crate) dispatched_at_ms: u64,
    /// When the task is taken back if no report arrived.
    pub(crate) deadline_ms: u64,
}
