//! Recovery times: from each fault's start to the next task handed out (a report, not a
//! verdict), summarised as p50, p99 and max.

use serde::{Deserialize, Serialize};

use crate::checker::completed;
use crate::history::{Op, OpKind, Operation, Phase, Value};

/// Recovery times of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoverySummary {
    /// Per fault: its name, its start (ms) and the time to the next dispatch (ms); `None` if
    /// nothing was dispatched after it.
    pub faults: Vec<(String, u64, Option<u64>)>,
    pub p50_ms: u64,
    pub p99_ms: u64,
    pub max_ms: u64,
}

pub fn summary(ops: &[Op]) -> RecoverySummary {
    let dispatches = dispatch_times(ops);
    let faults: Vec<(String, u64, Option<u64>)> = ops
        .iter()
        .filter_map(|op| match &op.f {
            Operation::Nemesis { fault, phase: Phase::Start, .. } => {
                Some((fault.clone(), op.time_ms))
            }
            _ => None,
        })
        .map(|(fault, start)| {
            let next = dispatches.iter().find(|time| **time >= start).map(|time| time - start);
            (fault, start, next)
        })
        .collect();
    let mut times: Vec<u64> = faults.iter().filter_map(|(_, _, time)| *time).collect();
    times.sort_unstable();
    RecoverySummary {
        p50_ms: percentile(&times, 0.50),
        p99_ms: percentile(&times, 0.99),
        max_ms: times.last().copied().unwrap_or(0),
        faults,
    }
}

/// When tasks were seen handed out, sorted: each grant a client received, and each status
/// read showing more tasks dispatched than any read before it (the training workload's
/// trainers are black boxes).
fn dispatch_times(ops: &[Op]) -> Vec<u64> {
    let mut times = Vec::new();
    let mut dispatched_max = None;
    for pair in completed(ops).into_iter().filter(|pair| pair.kind() == OpKind::Ok) {
        match &pair.complete.value {
            Value::Task { .. } => times.push(pair.complete.time_ms),
            Value::Status(snapshot) => {
                if dispatched_max.is_some_and(|max| snapshot.dispatched > max) {
                    times.push(pair.complete.time_ms);
                }
                dispatched_max = dispatched_max.max(Some(snapshot.dispatched));
            }
            _ => {}
        }
    }
    times.sort_unstable();
    times
}

/// Nearest-rank percentile of sorted values (0 for none).
fn percentile(sorted: &[u64], quantile: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((sorted.len() as f64 * quantile).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;

    #[test]
    fn measures_from_each_fault_to_the_next_dispatch() {
        let history = Builder::default()
            .nemesis(1_000, Phase::Start)
            .grant((1_200, 1_700), 1, 7, 1)
            .nemesis(2_000, Phase::Stop)
            .nemesis(5_000, Phase::Start)
            .grant((5_100, 5_300), 2, 8, 1);
        let summary = summary(&history.ops);
        assert_eq!(
            summary.faults.iter().map(|fault| fault.2).collect::<Vec<_>>(),
            [Some(700), Some(300)]
        );
        assert_eq!((summary.p50_ms, summary.p99_ms, summary.max_ms), (300, 700, 700));
    }
}
