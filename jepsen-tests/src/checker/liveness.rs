//! Liveness: after each heal (a fault's end with no other fault in force), the job makes
//! progress within a bound: a client write completes (a grant, a report, a registration, a
//! rendezvous add or compare-by-version), or a status read shows more tasks dispatched than
//! any read before the heal (the training workload's trainers are black boxes). A group that
//! answers reads but never commits again (a jammed write path) fails here.

use crate::checker::{completed, Violation};
use crate::history::{Op, OpKind, Operation, Phase, Value};

const NAME: &str = "liveness";

pub fn check(ops: &[Op], bound_ms: u64) -> Vec<Violation> {
    let progress = Progress::of(ops);
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
        if window_ms == bound_ms && !progress.after(heal, window_ms) {
            let message =
                format!("no progress within {bound_ms} ms of the heal at {} ms", heal.time_ms);
            violations.push(Violation::new(NAME, message, vec![heal.index]));
        }
    }
    violations
}

/// The history's evidence of progress: completed writes, and status reads with their
/// dispatch counts.
struct Progress<'a> {
    writes: Vec<&'a Op>,
    reads: Vec<(&'a Op, u64)>,
}

impl<'a> Progress<'a> {
    fn of(ops: &'a [Op]) -> Self {
        let pairs: Vec<_> =
            completed(ops).into_iter().filter(|pair| pair.kind() == OpKind::Ok).collect();
        let writes = pairs
            .iter()
            .filter(|pair| is_write(&pair.invoke.f))
            .map(|pair| pair.complete)
            .collect();
        let reads = pairs
            .iter()
            .filter_map(|pair| match &pair.complete.value {
                Value::Status(snapshot) => Some((pair.complete, snapshot.dispatched)),
                _ => None,
            })
            .collect();
        Self { writes, reads }
    }

    /// Whether a write completed, or the dispatch count rose, within `window_ms` of `heal`.
    fn after(&self, heal: &Op, window_ms: u64) -> bool {
        let in_window = |op: &Op| op.index > heal.index && op.time_ms <= heal.time_ms + window_ms;
        let before = self
            .reads
            .iter()
            .filter(|(read, _)| read.index < heal.index)
            .map(|(_, count)| *count)
            .max();
        let rose = self
            .reads
            .iter()
            .any(|(read, count)| in_window(read) && before.is_some_and(|before| *count > before));
        rose || self.writes.iter().any(|write| in_window(write))
    }
}

fn is_write(f: &Operation) -> bool {
    matches!(
        f,
        Operation::Register
            | Operation::GetTask { .. }
            | Operation::TaskFinished { .. }
            | Operation::TaskFailed { .. }
            | Operation::RendezvousAdd
            | Operation::RendezvousCompareVersion { .. }
    )
}

fn is_nemesis(op: &Op, wanted: Phase) -> bool {
    matches!(&op.f, Operation::Nemesis { phase, .. } if *phase == wanted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;
    use crate::history::StatusSnapshot;

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

    fn status(builder: Builder, time_ms: u64, dispatched: u64) -> Builder {
        let snapshot = StatusSnapshot { dispatched, ..Default::default() };
        builder.call(
            (time_ms, time_ms + 1),
            900,
            Operation::Status,
            OpKind::Ok,
            Value::Status(snapshot),
        )
    }

    #[test]
    fn progress_seen_in_status_reads_counts() {
        let start = || {
            status(Builder::default().nemesis(0, Phase::Start), 500, 10).nemesis(3_000, Phase::Stop)
        };
        assert_eq!(check(&tail(status(start(), 4_000, 12), 20_000), 8_000), Vec::new());
        assert_eq!(check(&tail(status(start(), 4_000, 10), 20_000), 8_000).len(), 1);
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
