//! Liveness: after each heal (a fault's end with no other fault in force), some write
//! completes within a bound: a grant, an accepted or refused report, a registration. A group
//! that answers reads but never commits again (a jammed write path) fails here.

use crate::checker::{completed, Violation};
use crate::history::{Op, OpKind, Operation, Phase};

const NAME: &str = "liveness";

pub fn check(ops: &[Op], bound_ms: u64) -> Vec<Violation> {
    let writes: Vec<&Op> = completed(ops)
        .into_iter()
        .filter(|pair| pair.kind() == OpKind::Ok && is_write(&pair.invoke.f))
        .map(|pair| pair.complete)
        .collect();
    let end_ms = ops.last().map_or(0, |op| op.time_ms);
    let mut violations = Vec::new();
    for heal in ops.iter().filter(|op| is_nemesis(op, Phase::Stop)) {
        let next_fault_ms = ops
            .iter()
            .filter(|op| op.index > heal.index && is_nemesis(op, Phase::Start))
            .map(|op| op.time_ms)
            .next()
            .unwrap_or(u64::MAX);
        let window_ms = bound_ms
            .min(next_fault_ms.saturating_sub(heal.time_ms))
            .min(end_ms.saturating_sub(heal.time_ms));
        let served = writes
            .iter()
            .any(|write| write.index > heal.index && write.time_ms <= heal.time_ms + window_ms);
        if !served && window_ms == bound_ms {
            let message = format!(
                "no write completed within {bound_ms} ms of the heal at {} ms",
                heal.time_ms
            );
            violations.push(Violation::new(NAME, message, vec![heal.index]));
        }
    }
    violations
}

fn is_write(f: &Operation) -> bool {
    matches!(
        f,
        Operation::Register
            | Operation::GetTask { .. }
            | Operation::TaskFinished { .. }
            | Operation::TaskFailed { .. }
    )
}

fn is_nemesis(op: &Op, wanted: Phase) -> bool {
    matches!(&op.f, Operation::Nemesis { phase, .. } if *phase == wanted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;
    use crate::history::Value;

    fn tail(builder: Builder, time_ms: u64) -> Vec<Op> {
        builder.call((time_ms, time_ms + 1), 99, Operation::Status, OpKind::Ok, Value::None).ops
    }

    #[test]
    fn a_write_after_the_heal_passes() {
        let history = Builder::default()
            .nemesis(0, Phase::Start)
            .nemesis(3_000, Phase::Stop)
            .grant((3_100, 4_000), 1, 7, 1);
        assert_eq!(check(&tail(history, 20_000), 8_000), Vec::new());
    }

    #[test]
    fn a_group_that_never_commits_again_is_caught() {
        let history = Builder::default().nemesis(0, Phase::Start).nemesis(3_000, Phase::Stop).call(
            (3_100, 9_000),
            1,
            Operation::GetTask { trainer: 1, pass: 1 },
            OpKind::Info,
            Value::None,
        );
        let violations = check(&tail(history, 20_000), 8_000);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].message.contains("heal at 3000 ms"), "{violations:?}");
    }

    #[test]
    fn a_heal_cut_short_by_the_next_fault_is_not_judged() {
        let history = Builder::default()
            .nemesis(0, Phase::Start)
            .nemesis(3_000, Phase::Stop)
            .nemesis(5_000, Phase::Start);
        assert_eq!(check(&tail(history, 20_000), 8_000), Vec::new());
    }
}
