//! Checkers: each judges the history for one property and returns the violations it found,
//! each naming the operations involved. `check_all` runs them all into a [`Report`].

pub mod agreement;
pub mod failed_tasks;
pub mod fencing;
pub mod linearizable;
pub mod liveness;
pub mod lost_task;
pub mod membership;
pub mod process_exits;
pub mod queue_invariants;
pub mod recovery;
pub mod rendezvous_keys;

use serde::{Deserialize, Serialize};

use crate::history::{Op, OpKind, Operation};
use crate::nemesis::Schedule;
use crate::report::Report;

/// One broken property.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub checker: String,
    pub message: String,
    /// Indices into the history of the operations involved.
    pub ops: Vec<usize>,
}

impl Violation {
    pub fn new(checker: &str, message: String, ops: Vec<usize>) -> Self {
        Self { checker: checker.to_string(), message, ops }
    }
}

/// The bounds the checkers judge by.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckOptions {
    /// After a heal, some write must complete within this long.
    pub liveness_ms: u64,
    /// A task granted and never reported must be granted again within this long (its
    /// timeout or its holder's lease, plus a failover), unless the run ended first.
    pub regrant_ms: u64,
    /// The linearizability search gives up (result: unknown) after this many states.
    pub search_states_max: u64,
}

impl Default for CheckOptions {
    fn default() -> Self {
        Self { liveness_ms: 10_000, regrant_ms: 15_000, search_states_max: 2_000_000 }
    }
}

/// Runs every checker.
pub fn check_all(ops: &[Op], schedule: &Schedule, options: &CheckOptions) -> Report {
    let mut violations = Vec::new();
    violations.extend(queue_invariants::check(ops));
    violations.extend(agreement::check(ops));
    violations.extend(fencing::check(ops));
    violations.extend(lost_task::check(ops, options.regrant_ms));
    violations.extend(liveness::check(ops, options.liveness_ms));
    violations.extend(process_exits::check(ops));
    violations.extend(failed_tasks::check(ops));
    violations.extend(rendezvous_keys::check(ops));
    violations.extend(membership::check(ops));
    let linearizable = linearizable::check(ops, options.search_states_max);
    violations.extend(linearizable.violations);
    let mut report =
        Report::new(schedule, ops, violations, linearizable.unknown, recovery::summary(ops));
    report.exits = process_exits::summary(ops);
    report
}

/// A completed operation: its invocation and completion, paired by process.
#[derive(Clone, Debug)]
pub struct Completed<'a> {
    pub invoke: &'a Op,
    pub complete: &'a Op,
}

impl Completed<'_> {
    pub fn kind(&self) -> OpKind {
        self.complete.kind
    }
}

/// Pairs each invocation with the next event of the same process (its completion); an
/// invocation with none is left out (the run ended first).
pub fn completed(ops: &[Op]) -> Vec<Completed<'_>> {
    let mut open: std::collections::BTreeMap<u64, &Op> = std::collections::BTreeMap::new();
    let mut pairs = Vec::new();
    for op in ops {
        if matches!(op.f, Operation::Nemesis { .. } | Operation::ProcessExit { .. }) {
            continue;
        }
        match op.kind {
            OpKind::Invoke => {
                open.insert(op.process, op);
            }
            _ => {
                if let Some(invoke) = open.remove(&op.process) {
                    pairs.push(Completed { invoke, complete: op });
                }
            }
        }
    }
    pairs
}

#[cfg(test)]
pub(crate) mod test_history {
    //! Hand-written histories for the checkers' tests.
    use crate::history::{Op, OpKind, Operation, Phase, Value, NEMESIS_PROCESS};

    /// Builds a history event by event, each at the time given.
    #[derive(Default)]
    pub struct Builder {
        pub ops: Vec<Op>,
    }

    impl Builder {
        pub fn op(
            mut self,
            time_ms: u64,
            process: u64,
            kind: OpKind,
            f: Operation,
            value: Value,
        ) -> Self {
            let index = self.ops.len();
            self.ops.push(Op { index, process, kind, f, value, time_ms });
            self
        }

        /// An invocation at `start` and its completion at `end`.
        pub fn call(
            self,
            (start, end): (u64, u64),
            process: u64,
            f: Operation,
            kind: OpKind,
            value: Value,
        ) -> Self {
            self.op(start, process, OpKind::Invoke, f.clone(), Value::None)
                .op(end, process, kind, f, value)
        }

        pub fn grant(self, times: (u64, u64), process: u64, task_id: u64, epoch: u64) -> Self {
            let f = Operation::GetTask { trainer: process, pass: 1 };
            self.call(times, process, f, OpKind::Ok, Value::Task { task_id, epoch, pass: 1 })
        }

        pub fn finish(
            self,
            times: (u64, u64),
            process: u64,
            task_id: u64,
            epoch: u64,
            accepted: bool,
        ) -> Self {
            let f = Operation::TaskFinished { trainer: process, task_id, epoch };
            self.call(times, process, f, OpKind::Ok, Value::Accepted { accepted })
        }

        pub fn nemesis(self, time_ms: u64, phase: Phase) -> Self {
            let f = Operation::Nemesis { fault: "kill-leader".into(), targets: vec![0], phase };
            self.op(time_ms, NEMESIS_PROCESS, OpKind::Info, f, Value::None)
        }
    }
}
