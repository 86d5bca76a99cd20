//! The job always finishes: trainers that keep working reach JobFinished under any policy.

use master::state::{Command, MasterState, QueuePolicy, Request, Response, TaskAssignment};
use proptest::prelude::*;

use crate::support::{checked, chunks};

/// A round cap far above what any generated job needs, so a hang fails instead of spinning.
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
    let response = state.apply(&Request { client: None, now_ms, term: None, command });
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

/// Plays `outcome` for the task `trainer` got; returns the trainer to use next in its place.
fn play(
    state: &mut MasterState,
    now_ms: &mut u64,
    trainer: u64,
    outcome: Outcome,
    assignment: &TaskAssignment,
    step: usize,
) -> u64 {
    let (task_id, epoch) = (assignment.task_id, assignment.epoch);
    *now_ms += 10;
    match outcome {
        Outcome::Finish => {
            apply(state, *now_ms, Command::TaskFinished { task_id, epoch }, step);
        }
        Outcome::Fail => {
            let reason = "bad chunk".to_string();
            apply(state, *now_ms, Command::TaskFailed { task_id, epoch, reason }, step);
        }
        Outcome::Timeout => {
            // Another trainer's timeout in this round may already have expired this task.
            *now_ms = (*now_ms).max(assignment.deadline_ms);
            if state.has_expired(*now_ms) {
                apply(state, *now_ms, Command::ExpireTasks, step);
            }
        }
        Outcome::Lose => {
            apply(state, *now_ms, Command::TrainerLost { trainer }, step);
            return register(state, *now_ms, step);
        }
    }
    trainer
}

/// Drives `trainer_count` trainers in rounds (all ask, then all report) until JobFinished.
/// Faults come from `script` for the first `fault_steps` reports; after that every task
/// finishes (the faults heal), as in the simulator's liveness phase.
fn drive(state: &mut MasterState, trainer_count: usize, script: &[Outcome], fault_steps: usize) {
    let mut now_ms = 0;
    let mut trainers: Vec<u64> = (0..trainer_count).map(|_| register(state, now_ms, 0)).collect();
    let mut step = 0;
    // Rounds, not reports, are bounded: a round in which nobody got a task must not spin.
    for _round in 0..STEP_COUNT_MAX {
        let mut assignments = Vec::new();
        for (slot, trainer) in trainers.iter().enumerate() {
            let pass = state.status().pass;
            match apply(state, now_ms, Command::GetTask { trainer: *trainer, pass }, step) {
                Response::JobFinished => return,
                Response::Task(assignment) => assignments.push((slot, assignment)),
                Response::NoMoreAvailable => {}
                other => panic!("a trainer of the current pass got {other:?}"),
            }
        }
        for (slot, assignment) in assignments {
            let outcome =
                if step < fault_steps { script[step % script.len()] } else { Outcome::Finish };
            trainers[slot] = play(state, &mut now_ms, trainers[slot], outcome, &assignment, step);
            step += 1;
        }
    }
    panic!("the job did not finish in {STEP_COUNT_MAX} rounds")
}

proptest! {
    /// For random datasets, policies, trainer counts and faults, the job reaches JobFinished with
    /// every task in done or failed, and every pass ran unless all its tasks had failed for good.
    #[test]
    fn job_always_finishes(
        chunk_count in 1u64..20,
        passes in 1u32..4,
        policy in policy(),
        trainer_count in 1usize..4,
        script in proptest::collection::vec(outcome(), 1..40),
        fault_steps in 0usize..200,
    ) {
        let mut state = MasterState::new();
        let command = Command::ReportDataset { job: "job".into(), chunks: chunks(chunk_count), passes, policy };
        let accepted = apply(&mut state, 0, command, 0);
        let is_accepted = matches!(accepted, Response::DatasetAccepted { .. });
        prop_assert!(is_accepted);
        drive(&mut state, trainer_count, &script, fault_steps);
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
