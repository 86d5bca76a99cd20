//! Restore fencing: no push older than the last restore is applied. A gradient computed on
//! values of the model before a restore replaced it (its pull met a shard loaded for an
//! earlier restore than the one it lands on) must never change the restored model: the
//! pserver refuses it (`model-restored`), or it lands on a shard the restore will still
//! replace. Judged from the simulation's own record of what each shard was loaded for
//! (`data_plane.rs`), never from the restore numbers the production check compares.

use super::Violation;
use crate::history::PushEvent;

/// Every applied push landed on a shard of no later restore than its values came from.
pub fn check(pushes: &[PushEvent]) -> Result<(), Violation> {
    let late = pushes.iter().find(|push| push.landed_on.is_some_and(|on| on > push.computed_on));
    match late {
        None => Ok(()),
        Some(push) => Err(Violation::new(
            "restore fencing",
            format!(
                "trainer {} of job {:?} pushed a gradient computed on the model of restore {} \
                 to slot {} (generation {}), and it was applied to the shard reloaded for \
                 restore {}",
                push.trainer,
                push.job,
                push.computed_on,
                push.slot,
                push.generation,
                push.landed_on.unwrap_or_default()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(computed_on: u64, landed_on: Option<u64>) -> PushEvent {
        let job = "a".to_string();
        PushEvent { job, trainer: 1_000, slot: 0, generation: 1, computed_on, landed_on }
    }

    #[test]
    fn only_an_applied_push_of_an_older_model_is_a_violation() {
        assert!(check(&[push(0, Some(0)), push(1, Some(1)), push(0, None)]).is_ok());
        let violation = check(&[push(1, Some(1)), push(0, Some(1))]).unwrap_err();
        assert_eq!(violation.invariant, "restore fencing");
        assert!(violation.detail.contains("computed on the model of restore 0"), "{violation}");
    }
}
