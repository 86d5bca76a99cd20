//! Membership: after the run the leader lists exactly the group's masters as voters, no
//! learner, and no change half done (a joint configuration left behind by a leader that died
//! between a change's two commits); and no step of the membership nemesis found the group
//! breaking a promise (a removal that never committed, a removed master that kept running or
//! left no `REMOVED` marker, a joiner that never became a voter: its steps recorded `Fail`).
//! A step whose answer was lost to a fault (`Info`) proves nothing either way.

use crate::checker::{completed, Violation};
use crate::cluster::MASTER_COUNT;
use crate::history::{Op, OpKind, Operation, Value};

const NAME: &str = "membership";

pub fn check(ops: &[Op]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for pair in completed(ops) {
        let Operation::MemberChange { step, master } = &pair.invoke.f else { continue };
        if pair.kind() != OpKind::Fail {
            continue;
        }
        let outcome = match &pair.complete.value {
            Value::Changed { outcome, .. } => outcome.as_str(),
            _ => "",
        };
        let message = format!("membership step {step} of master-{master} failed: {outcome}");
        violations.push(Violation::new(
            NAME,
            message,
            vec![pair.invoke.index, pair.complete.index],
        ));
    }
    violations.extend(final_members(ops));
    violations
}

/// The last member list read: every master a voter, nothing else, no change half done. A
/// history without one (an older build's) is not judged.
fn final_members(ops: &[Op]) -> Option<Violation> {
    let pairs = completed(ops);
    let last = pairs.iter().rev().find(|pair| pair.invoke.f == Operation::Members)?;
    let indexes = vec![last.invoke.index, last.complete.index];
    let expected: Vec<u64> = (1..=MASTER_COUNT as u64).collect();
    let message = match (&last.complete.value, last.kind()) {
        (Value::Members { voters, learners, joint, .. }, OpKind::Ok) => {
            if *voters == expected && learners.is_empty() && !joint {
                return None;
            }
            let joint = if *joint { ", a change half done (joint configuration)" } else { "" };
            format!(
                "after the run the leader lists voters {voters:?} and learners {learners:?}{joint}; \
                 expected voters {expected:?} only"
            )
        }
        (value, _) => format!("after the run no leader listed the members: {value:?}"),
    };
    Some(Violation::new(NAME, message, indexes))
}

/// One line per membership step, in order: `12034 ms master-2 remove: ok in 310 ms (...)`.
pub fn summary(ops: &[Op]) -> Vec<String> {
    let outcome_name = |kind: OpKind| match kind {
        OpKind::Ok => "ok",
        OpKind::Fail => "FAILED",
        OpKind::Info => "unknown",
        OpKind::Invoke => "open",
    };
    let mut lines = Vec::new();
    for pair in completed(ops) {
        let Operation::MemberChange { step, master } = &pair.invoke.f else { continue };
        let (elapsed_ms, outcome) = match &pair.complete.value {
            Value::Changed { elapsed_ms, outcome } => (*elapsed_ms, outcome.as_str()),
            _ => (pair.complete.time_ms.saturating_sub(pair.invoke.time_ms), ""),
        };
        lines.push(format!(
            "{:>7} ms master-{master} {step}: {} in {elapsed_ms} ms ({outcome})",
            pair.invoke.time_ms,
            outcome_name(pair.kind())
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;
    use crate::history::MEMBERSHIP_PROCESS;

    fn members(
        builder: Builder,
        time: u64,
        voters: &[u64],
        learners: &[u64],
        joint: bool,
    ) -> Builder {
        let value = Value::Members {
            leader: 1,
            voters: voters.to_vec(),
            learners: learners.to_vec(),
            joint,
        };
        builder.call((time, time + 1), MEMBERSHIP_PROCESS, Operation::Members, OpKind::Ok, value)
    }

    fn step(builder: Builder, time: u64, step: &str, kind: OpKind) -> Builder {
        let f = Operation::MemberChange { step: step.into(), master: 2 };
        let value = Value::Changed { elapsed_ms: 1, outcome: "listed".into() };
        builder.call((time, time + 1), MEMBERSHIP_PROCESS, f, kind, value)
    }

    fn messages(builder: &Builder) -> Vec<String> {
        check(&builder.ops).into_iter().map(|violation| violation.message).collect()
    }

    /// The final list must show every master a voter, no learner, no joint configuration;
    /// only the last read counts, and a history with none is not judged.
    #[test]
    fn the_final_members_are_every_master_as_a_voter() {
        assert!(messages(&Builder::default()).is_empty());
        let fine = members(Builder::default(), 10, &[1, 3], &[2], false);
        let fine = members(fine, 20, &[1, 2, 3], &[], false);
        assert!(messages(&fine).is_empty(), "{:?}", messages(&fine));
        let joint = members(Builder::default(), 10, &[1, 2, 3], &[], true);
        let found = messages(&joint);
        assert!(found.len() == 1 && found[0].contains("joint configuration"), "{found:?}");
        let short = members(Builder::default(), 10, &[1, 3], &[2], false);
        let found = messages(&short);
        assert!(found.len() == 1 && found[0].contains("voters [1, 3]"), "{found:?}");
        let f = Operation::Members;
        let error = Value::Error { message: "no leader".into() };
        let silent = Builder::default().call((1, 2), MEMBERSHIP_PROCESS, f, OpKind::Info, error);
        assert!(messages(&silent)[0].contains("no leader listed"), "{:?}", messages(&silent));
    }

    /// A failed step is a violation; a step whose answer was lost to a fault is not.
    #[test]
    fn failed_steps_are_caught_and_unknown_ones_are_not() {
        let history = step(Builder::default(), 10, "remove", OpKind::Info);
        let history = step(history, 20, "voter", OpKind::Fail);
        let history = members(history, 30, &[1, 2, 3], &[], false);
        let found = messages(&history);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("step voter of master-2 failed: listed"), "{found:?}");
        let lines = summary(&history.ops);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[1].contains("master-2 voter: FAILED in 1 ms"), "{lines:?}");
    }
}
