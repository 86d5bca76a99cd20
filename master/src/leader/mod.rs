//! The leader's own duties: trainer and pserver leases (soft state, never replicated) and the
//! periodic check that proposes `TrainerLost`, `ReleasePServerSlot` and `ExpireTasks` when, and
//! only when, the applied state says something is due.

mod duties;
mod lease_table;
mod quiet_time;
mod reload_failures;

pub(crate) use duties::{run_duties, LeaderDuties};
pub(crate) use reload_failures::ReloadFailures;
