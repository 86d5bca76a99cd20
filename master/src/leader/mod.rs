//! The leader's own duties: trainer and pserver leases and jobs' idle clocks (soft state, never
//! replicated) and the periodic check that proposes `TrainerLost`, `ReleasePServerSlot`,
//! `ExpireTasks`, `RemoveJob` and `CancelIdleJob` when, and only when, the applied state and
//! the soft state say something is due.

mod decisions;
mod duties;
mod idle_jobs;
mod lease_table;
mod quiet_time;
mod reload_failures;

pub(crate) use duties::{run_duties, LeaderDuties};
pub(crate) use reload_failures::ReloadFailures;
