//! Whose fault a task failure is: the data's, or the reporting trainer's view of it.

use serde::{Deserialize, Serialize};

/// What kind of fault a trainer reports with a failed task. The two are told apart because a
/// trainer's own fault (a broken mount, a truncated local copy) is not the data's fault: it must
/// never exhaust a task's failure budget while other trainers can read the task.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The bytes are there but wrong (a chunk's CRC, a record that does not decode): any trainer
    /// would fail the same way. Spends the task's failure budget once per distinct trainer.
    Content,
    /// The trainer could not read the bytes (an I/O error, a file shorter than the master
    /// recorded, a header that no longer matches the scan): another trainer may. The task goes
    /// back to todo without spending its failure budget.
    Local,
}
