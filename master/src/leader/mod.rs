//! The leader's own duties: trainer and pserver leases and jobs' idle clocks (soft state, never
//! replicated) and the periodic check that proposes `TrainerLost`, `ReleasePServerSlot`,
//! `ExpireTasks`, `RemoveJob` and `CancelIdleJob` when, and only when, the applied state and
//! the soft state say something is due; and the raise of the group's feature level once every
//! member decodes a newer one (`level_raise.rs`).

mod decisions;
mod duties;
mod idle_jobs;
mod lease_table;
mod level_raise;
mod quiet_time;
mod reload_failures;
mod ticks;

pub(crate) use duties::{run_duties, LeaderDuties};
pub(crate) use level_raise::{run_level_raise, LevelWait, LevelsHeard};
pub(crate) use reload_failures::ReloadFailures;
