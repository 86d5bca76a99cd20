//! No failed task: every status read shows an empty failed list. The harness's datasets are
//! whole, so a task can land there only by something other than its data: a trainer whose
//! own view of the data broke (`break-trainer-data`) spending the task's failure budget, or
//! timeouts beyond the bound the harness sets (`--max-task-failures`, far above what its
//! faults cause). A real run sends only genuinely corrupt chunks there.

use crate::checker::{completed, Violation};
use crate::history::{Op, OpKind, Value};

const NAME: &str = "failed-tasks";

pub fn check(ops: &[Op]) -> Vec<Violation> {
    let first =
        completed(ops).into_iter().filter(|pair| pair.kind() == OpKind::Ok).find_map(|pair| {
            match &pair.complete.value {
                Value::Status(snapshot) if snapshot.failed > 0 => Some((pair.complete, snapshot)),
                _ => None,
            }
        });
    first
        .map(|(op, snapshot)| {
            let message = format!(
                "{} tasks in the failed list at {} ms, though the dataset is whole",
                snapshot.failed, op.time_ms
            );
            Violation::new(NAME, message, vec![op.index])
        })
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;
    use crate::history::{Operation, StatusSnapshot};

    fn status(builder: Builder, time_ms: u64, failed: u64) -> Builder {
        let snapshot = StatusSnapshot { failed, ..Default::default() };
        let value = Value::Status(snapshot);
        builder.call((time_ms, time_ms + 1), 900, Operation::Status, OpKind::Ok, value)
    }

    /// The first status read showing a failed task is caught (once); reads with none pass.
    #[test]
    fn a_task_in_the_failed_list_is_caught() {
        let clean = status(status(Builder::default(), 100, 0), 200, 0);
        assert_eq!(check(&clean.ops), Vec::new());
        let failed = status(status(clean, 300, 3), 400, 3);
        let violations = check(&failed.ops);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].message.contains("3 tasks in the failed list at 301 ms"));
    }
}
