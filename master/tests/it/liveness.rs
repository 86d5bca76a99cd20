//! The job always finishes: trainers that keep working reach JobFinished under any policy.

use master::state::{Command, MasterState, QueuePolicy, Request, Response};
use proptest::prelude::*;

use crate::support::{checked, chunks};

/// A step cap far above what any generated job needs, so a hang fails instead of spinning.
const STEP_COUNT_MAX: usize = 100_000;

/// What the driver does with the task it got, chosen from the random script.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Finish,
    Fail,
    /// Sit on it until the deadline, then the leader expires it.
    Timeout,
    /// The trainer dies; the leader declares it lost and a new one registers.
    Lose,
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        6 => Just(Outcome::Finish),
        2 => Just(Outcome::Fail),
        1 => Just(Outcome::Timeout),
        1 => Just(Outcome::Lose),
    ]
}

fn policy() -> impl Strategy<Value = QueuePolicy> {
    (1u32..4, 0u32..3, any::<bool>(), 0u32..4).prop_map(
        |(chunks_per_task, max_task_failures, retry_failed_next_pass, timeout_factor)| {
            QueuePolicy {
                chunks_per_task,
                task_timeout_min_ms: 500,
                timeout_factor,
                max_task_failures,
                retry_failed_next_pass,
            }
        },
    )
}

/// Applies `command` at `now_ms`, checking the invariants of the step.
fn apply(state: &mut MasterState, now_ms: u64, command: Command, step: usize) -> Response {
    let before = state.clone();
    let response = state.apply(&Request { client: None, now_ms, command });
    checked("liveness", step, &before, state);
    response
}

/// Registers a trainer and returns its id.
fn register(state: &mut MasterState, now_ms: u64, step: usize) -> u64 {
    match apply(state, now_ms, Command::RegisterTrainer { name: "t".into() }, step) {
        Response::TrainerRegistered { trainer } => trainer,
        other => panic!("registration answered {other:?}"),
    }
}

/// Plays `outcome` for an assignment; returns the trainer to use next.
fn play(
    state: &mut MasterState,
    now_ms: &mut u64,
    trainer: u64,
    outcome: Outcome,
    assigned: (u64, u64),
    step: usize,
) -> u64 {
    let (task, epoch) = assigned;
    *now_ms += 10;
    match outcome {
        Outcome::Finish => {
            apply(state, *now_ms, Command::TaskFinished { task, epoch }, step);
        }
        Outcome::Fail => {
            let reason = "bad chunk".to_string();
            apply(state, *now_ms, Command::TaskFailed { task, epoch, reason }, step);
        }
        Outcome::Timeout => {
            *now_ms = state.next_deadline_ms().expect("the task is pending");
            assert!(state.has_expired(*now_ms));
            apply(state, *now_ms, Command::ExpireTasks, step);
        }
        Outcome::Lose => {
            apply(state, *now_ms, Command::TrainerLost { trainer }, step);
            return register(state, *now_ms, step);
        }
    }
    trainer
}

/// Drives one trainer until JobFinished. Faults come from `script` for its first `fault_steps`
/// steps; after that every task finishes (the faults heal), as in the simulator's liveness phase.
fn drive(state: &mut MasterState, script: &[Outcome], fault_steps: usize) -> usize {
    let mut now_ms = 0;
    let mut trainer = register(state, now_ms, 0);
    for step in 0..STEP_COUNT_MAX {
        let pass = state.status().pass;
        match apply(state, now_ms, Command::GetTask { trainer, pass }, step) {
            Response::JobFinished => return step,
            Response::Task(assignment) => {
                let outcome = match step < fault_steps {
                    true => script[step % script.len()],
                    false => Outcome::Finish,
                };
                let assigned = (assignment.task, assignment.epoch);
                trainer = play(state, &mut now_ms, trainer, outcome, assigned, step);
            }
            other => panic!("a lone trainer of the current pass got {other:?}"),
        }
    }
    panic!("the job did not finish in {STEP_COUNT_MAX} steps")
}

proptest! {
    /// For random datasets, policies and faults, the job reaches JobFinished with every task in
    /// done or failed, and every pass ran unless all its tasks had failed for good.
    #[test]
    fn job_always_finishes(
        chunk_count in 1u64..20,
        passes in 1u32..4,
        policy in policy(),
        script in proptest::collection::vec(outcome(), 1..40),
        fault_steps in 0usize..200,
    ) {
        let mut state = MasterState::new();
        let command = Command::ReportDataset { job: "job".into(), chunks: chunks(chunk_count), passes, policy };
        let accepted = apply(&mut state, 0, command, 0);
        let is_accepted = matches!(accepted, Response::DatasetAccepted { .. });
        prop_assert!(is_accepted);
        drive(&mut state, &script, fault_steps);
        let status = state.status();
        prop_assert!(status.job_finished);
        prop_assert_eq!(status.todo_count + status.pending_count, 0);
        prop_assert_eq!(status.done_count + status.failed_count, status.task_count);
        if status.pass + 1 < passes {
            // The job ended early only because nothing was left to run.
            prop_assert_eq!(status.done_count, 0);
            prop_assert!(!policy.retry_failed_next_pass);
        }
    }
}
