//! The scripted fixture: a `MasterState` driven step by step and checked after every step.
//!
//! A script is a list of steps, each a command with the response it must get, or a look at the
//! queue counts. After every applied step the state must satisfy `check_invariants` and the step
//! must satisfy `check_transition`.

use master::state::{ChunkRef, ClientStamp, Command, MasterState, QueuePolicy, Request, Response};

/// What a step's response must be.
#[derive(Debug, Clone)]
pub(crate) enum Expect {
    /// Exactly this response.
    Is(Response),
    /// A task assignment with these fields (chunks are checked by `Is` where they matter).
    Task { task_id: u64, epoch: u64, pass: u32, deadline_ms: u64 },
    /// A rejection whose reason contains this text.
    RejectedWith(&'static str),
}

/// One line of a script.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Apply {
        client: Option<ClientStamp>,
        now_ms: u64,
        command: Command,
        expect: Expect,
    },
    /// `[todo, pending, done, failed]` counts, the pass and whether the job finished.
    Counts {
        pass: u32,
        queues: [u64; 4],
        job_finished: bool,
    },
}

/// Applies `steps` to a fresh state, checking every expectation and invariant; returns the
/// final state for extra assertions.
pub(crate) fn run(name: &str, steps: &[Step]) -> MasterState {
    let mut state = MasterState::new();
    for (index, step) in steps.iter().enumerate() {
        match step {
            Step::Apply { client, now_ms, command, expect } => {
                let before = state.clone();
                let request = Request {
                    client: *client,
                    now_ms: *now_ms,
                    term: None,
                    command: command.clone(),
                };
                let response = state.apply(&request);
                assert!(
                    matches(expect, &response),
                    "{name}, step {index} {command:?}: got {response:?}, want {expect:?}"
                );
                checked(name, index, &before, &state);
            }
            Step::Counts { pass, queues, job_finished } => {
                let status = state.status();
                let actual = [
                    status.todo_count,
                    status.pending_count,
                    status.done_count,
                    status.failed_count,
                ];
                assert_eq!(
                    (status.pass, actual, status.job_finished),
                    (*pass, *queues, *job_finished),
                    "{name}, step {index}: (pass, [todo, pending, done, failed], finished)"
                );
            }
        }
    }
    state
}

/// Applies `steps` checking only each answer (and `Counts`), for scripts too long for `run`.
pub(crate) fn run_unchecked(name: &str, steps: &[Step]) -> MasterState {
    let mut state = MasterState::new();
    for (index, step) in steps.iter().enumerate() {
        let Step::Apply { client, now_ms, command, expect } = step else { continue };
        let request =
            Request { client: *client, now_ms: *now_ms, term: None, command: command.clone() };
        let response = state.apply(&request);
        assert!(
            matches(expect, &response),
            "{name}, step {index} {command:?}: got {response:?}, want {expect:?}"
        );
    }
    state
}

/// Asserts the invariants of `after` and of the step from `before`.
pub(crate) fn checked(name: &str, index: usize, before: &MasterState, after: &MasterState) {
    if let Err(violation) = after.check_invariants() {
        panic!("{name}, step {index}: invariant broken: {violation}");
    }
    if let Err(violation) = MasterState::check_transition(before, after) {
        panic!("{name}, step {index}: transition broken: {violation}");
    }
}

fn matches(expect: &Expect, response: &Response) -> bool {
    match (expect, response) {
        (Expect::Is(expected), actual) => expected == actual,
        (Expect::Task { task_id, epoch, pass, deadline_ms }, Response::Task(assignment)) => {
            (assignment.task_id, assignment.epoch, assignment.pass, assignment.deadline_ms)
                == (*task_id, *epoch, *pass, *deadline_ms)
        }
        (Expect::RejectedWith(text), Response::Rejected { reason }) => reason.contains(text),
        _ => false,
    }
}

/// A command applied at `now_ms` by the leader itself (no client stamp).
pub(crate) fn at(now_ms: u64, command: Command, expect: Expect) -> Step {
    Step::Apply { client: None, now_ms, command, expect }
}

/// A command applied at `now_ms` on behalf of a client.
pub(crate) fn stamped(
    client_id: u64,
    seq: u64,
    now_ms: u64,
    command: Command,
    expect: Expect,
) -> Step {
    Step::Apply { client: Some(ClientStamp { client_id, seq }), now_ms, command, expect }
}

pub(crate) fn counts(pass: u32, queues: [u64; 4], job_finished: bool) -> Step {
    Step::Counts { pass, queues, job_finished }
}

pub(crate) fn is(response: Response) -> Expect {
    Expect::Is(response)
}

pub(crate) fn task(task_id: u64, epoch: u64, pass: u32, deadline_ms: u64) -> Expect {
    Expect::Task { task_id, epoch, pass, deadline_ms }
}

/// The policy most scripts use: one chunk per task, 1 s minimum timeout, k = 2, a task fails
/// for good on its second failure, failed tasks stay failed.
pub(crate) fn policy() -> QueuePolicy {
    QueuePolicy {
        chunks_per_task: 1,
        task_timeout_min_ms: 1000,
        timeout_factor: 2,
        max_task_failures: 1,
        retry_failed_next_pass: false,
    }
}

/// `count` chunks of one file, 100 bytes apart.
pub(crate) fn chunks(count: u64) -> Vec<ChunkRef> {
    (0..count)
        .map(|index| ChunkRef {
            path: "data/train.recordio".to_string(),
            offset: index * 100,
            compressed_size: 80,
            record_count: 10,
        })
        .collect()
}

pub(crate) fn report(chunk_count: u64, passes: u32, policy: QueuePolicy) -> Command {
    Command::ReportDataset { job: "job".to_string(), chunks: chunks(chunk_count), passes, policy }
}

/// The accepted answer for a dataset of `task_count` tasks.
pub(crate) fn accepted(task_count: u64, passes: u32) -> Expect {
    is(Response::DatasetAccepted { task_count, passes })
}

/// Registers trainer 1 and reports `chunk_count` chunks at time 0.
pub(crate) fn setup(chunk_count: u64, passes: u32, policy: QueuePolicy) -> Vec<Step> {
    let task_count = chunk_count.div_ceil(u64::from(policy.chunks_per_task));
    vec![
        at(0, register("one"), is(Response::TrainerRegistered { trainer: 1 })),
        at(0, report(chunk_count, passes, policy), accepted(task_count, passes)),
    ]
}

/// Registers trainers 2 to `last` (setup registered trainer 1), for scripts in which several
/// trainers hold tasks at once (a trainer holds one task at a time).
pub(crate) fn more_trainers(last: u64) -> Vec<Step> {
    (2..=last)
        .map(|trainer| {
            at(0, register(&format!("t{trainer}")), is(Response::TrainerRegistered { trainer }))
        })
        .collect()
}

pub(crate) fn register(name: &str) -> Command {
    Command::RegisterTrainer { name: name.to_string() }
}

pub(crate) fn get(trainer: u64, pass: u32) -> Command {
    Command::GetTask { trainer, pass }
}

pub(crate) fn finished(task_id: u64, epoch: u64) -> Command {
    Command::TaskFinished { task_id, epoch }
}

pub(crate) fn failed(task_id: u64, epoch: u64, reason: &str) -> Command {
    Command::TaskFailed { task_id, epoch, reason: reason.to_string() }
}

pub(crate) fn lost(trainer: u64) -> Command {
    Command::TrainerLost { trainer }
}

/// `setup` followed by `steps`.
pub(crate) fn script(setup_steps: Vec<Step>, steps: Vec<Step>) -> Vec<Step> {
    setup_steps.into_iter().chain(steps).collect()
}
