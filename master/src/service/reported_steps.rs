//! `ReportedSteps`: the update step each pserver slot's holder last reported in a heartbeat
//! (leader soft state, never replicated), so that a checkpoint record claiming a step far
//! beyond it is refused before it is proposed.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// How far a checkpoint's step may run ahead of the holder's last heartbeat. A step counts
/// applied pushes, each a whole RPC; between two heartbeats (a fifth of the lease) a pserver
/// applies far fewer than 2^24 of them, while a record of 2^62 (a forgery or a corrupted
/// step) would make every genuine record after it `Stale`.
pub const CHECKPOINT_STEP_AHEAD_MAX: u64 = 1 << 24;

/// A slot of a job: (job id, slot index).
pub(crate) type SlotOf = (u64, u32);

/// The latest step heard per slot, with the generation that reported it. At most one entry
/// per slot of a job: a new generation's report replaces the old one, and slots of jobs that
/// are gone are dropped once there are more entries than the group has slots.
#[derive(Debug, Default)]
pub(crate) struct ReportedSteps {
    by_slot: Mutex<BTreeMap<SlotOf, (u64, u64)>>,
}

impl ReportedSteps {
    /// The holder of `slot` under `generation` (its secret checked) reported `step`.
    pub(crate) fn heard(&self, slot: SlotOf, generation: u64, step: u64) {
        let mut by_slot = self.lock();
        let entry = by_slot.entry(slot).or_insert((generation, step));
        if entry.0 != generation {
            *entry = (generation, step);
        }
        entry.1 = entry.1.max(step);
    }

    /// Why a checkpoint record at `step` is refused, if the holder of `slot` under
    /// `generation` reported a step it runs far ahead of. A leader that has heard nothing from
    /// this holder yet (just elected) cannot tell, and lets the record through.
    pub(crate) fn check(&self, slot: SlotOf, generation: u64, step: u64) -> Result<(), String> {
        let Some(&(heard_generation, heard)) = self.lock().get(&slot) else { return Ok(()) };
        if heard_generation != generation || step <= heard.saturating_add(CHECKPOINT_STEP_AHEAD_MAX)
        {
            return Ok(());
        }
        Err(format!(
            "meta.step: {step} is more than {CHECKPOINT_STEP_AHEAD_MAX} beyond step {heard} that \
             slot {} (generation {generation}) last reported",
            slot.1
        ))
    }

    /// Keeps the entries of `live` jobs only, once there are more entries than slots a group
    /// may have.
    pub(crate) fn forget_gone_jobs(&self, live: impl Fn(u64) -> bool) {
        let mut by_slot = self.lock();
        if by_slot.len() > crate::state::PSERVER_COUNT_MAX as usize {
            by_slot.retain(|(job, _), _| live(*job));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<SlotOf, (u64, u64)>> {
        self.by_slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step far beyond the holder's last report is refused; unknown holders, other
    /// generations and steps within the bound pass; a new generation replaces the old report.
    #[test]
    fn a_step_far_beyond_the_last_heartbeat_is_refused() {
        let steps = ReportedSteps::default();
        assert!(steps.check((1, 0), 1, 1 << 62).is_ok(), "nothing heard: cannot tell");
        steps.heard((1, 0), 1, 100);
        steps.heard((1, 0), 1, 50);
        assert!(steps.check((1, 0), 1, 100 + CHECKPOINT_STEP_AHEAD_MAX).is_ok());
        let refused = steps.check((1, 0), 1, 101 + CHECKPOINT_STEP_AHEAD_MAX);
        assert!(refused.is_err_and(|reason| reason.contains("step 100")), "the maximum is kept");
        assert!(steps.check((1, 0), 1, 1 << 62).is_err());
        assert!(steps.check((1, 0), 2, 1 << 62).is_ok(), "another generation: not judged by 1's");
        steps.heard((1, 0), 2, 1 << 40);
        assert!(steps.check((1, 0), 2, 1 << 40).is_ok(), "a restored step is adopted");
        assert!(steps.check((1, 1), 1, 1 << 62).is_ok(), "another slot");
    }
}
