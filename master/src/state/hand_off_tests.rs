//! Tests of the task hand-off in one command (`FinishedThenGetTask`): its finishes apply as
//! `TaskFinished` does and before its ask, stale ones are fenced, too many are refused whole,
//! a retry is answered from its session, and a cancelled job answers it as a whole.

use super::command::Command;
use super::dataset::test_policy;
use super::master_state::MasterState;
use super::request::{ClientStamp, Request};
use super::response::{Response, TaskAssignment};

const TASKS: u64 = 3;

fn apply(state: &mut MasterState, command: Command) -> Response {
    state.apply(&Request { client: None, now_ms: 10, term: None, command })
}

fn stamped(state: &mut MasterState, seq: u64, command: Command) -> Response {
    let client = Some(ClientStamp { client_id: 77, seq });
    state.apply(&Request { client, now_ms: 10, term: None, command })
}

/// A group with one index job of `TASKS` one-index tasks and one pass, trainer 1 registered.
fn started() -> MasterState {
    let policy = test_policy();
    let report = Command::ReportIndexDataset {
        job: "j".into(),
        size: TASKS,
        shard_size: 1,
        passes: 1,
        policy,
    };
    let mut state = MasterState::new();
    assert!(matches!(apply(&mut state, report), Response::DatasetAccepted { .. }));
    let register = Command::in_job(1, Command::RegisterTrainer { name: "t".into() });
    assert_eq!(apply(&mut state, register), Response::TrainerRegistered { trainer: 1 });
    state
}

fn hand_off(finished: Vec<(u64, u64)>) -> Command {
    Command::in_job(1, Command::FinishedThenGetTask { finished, trainer: 1, pass: 0 })
}

/// The task a hand-off's ask (or a plain answer) handed out.
fn task(response: &Response) -> TaskAssignment {
    match response {
        Response::Task(assignment) => assignment.clone(),
        Response::FinishedThenTask { then, .. } => task(then),
        other => panic!("not a task: {other:?}"),
    }
}

fn receipt(assignment: &TaskAssignment) -> (u64, u64) {
    (assignment.task_id, assignment.epoch)
}

/// The finish applies before the ask: a trainer reporting its own task is handed the next
/// one (a plain ask would answer the task it holds), and the last finish ends the job.
#[test]
fn the_finish_lands_before_the_ask() {
    let mut state = started();
    let first = task(&apply(&mut state, hand_off(Vec::new())));
    let Response::FinishedThenTask { finished, then } =
        apply(&mut state, hand_off(vec![receipt(&first)]))
    else {
        panic!("not a hand-off answer")
    };
    assert_eq!(finished, vec![Response::Accepted]);
    let second = task(&then);
    assert_ne!(second.task_id, first.task_id, "handed the next task, not the one reported");
    let third = task(&apply(&mut state, hand_off(vec![receipt(&second)])));
    let last = apply(&mut state, hand_off(vec![receipt(&third)]));
    let ended = Response::FinishedThenTask {
        finished: vec![Response::Accepted],
        then: Box::new(Response::JobFinished),
    };
    assert_eq!(last, ended, "the last finish ends the job before the ask");
}

/// A receipt of a dispatch the task no longer has is fenced (`Stale`) and the ask still
/// answered; more receipts than a client may send are refused whole, nothing applied.
#[test]
fn stale_receipts_are_fenced_and_too_many_refused() {
    let mut state = started();
    let first = task(&apply(&mut state, hand_off(Vec::new())));
    let stale = (first.task_id, first.epoch + 1);
    let Response::FinishedThenTask { finished, then } = apply(&mut state, hand_off(vec![stale]))
    else {
        panic!("not a hand-off answer")
    };
    assert_eq!(finished, vec![Response::Stale]);
    assert_eq!(task(&then), first, "still held: answered the same task");
    let too_many = vec![receipt(&first); client::FINISHED_PER_ASK_MAX + 1];
    let refused = apply(&mut state, hand_off(too_many));
    assert!(matches!(&refused, Response::Rejected { reason } if reason.contains("at most 16")));
    let again = task(&apply(&mut state, hand_off(Vec::new())));
    assert_eq!(again, first, "the refused receipts finished nothing");
}

/// A retry of an applied hand-off (same stamp) is answered as the first attempt was (its
/// finish accepted, the same task), not applied again (the finish would read as stale).
#[test]
fn a_retry_is_answered_from_the_session() {
    let mut state = started();
    let first = task(&stamped(&mut state, 1, hand_off(Vec::new())));
    let answered = stamped(&mut state, 2, hand_off(vec![receipt(&first)]));
    assert!(matches!(&answered, Response::FinishedThenTask { finished, .. }
        if finished == &vec![Response::Accepted]));
    assert_eq!(stamped(&mut state, 2, hand_off(vec![receipt(&first)])), answered);
}

/// A cancelled job answers a hand-off whole: nothing of it applies.
#[test]
fn a_cancelled_job_answers_the_hand_off_whole() {
    let mut state = started();
    let first = task(&apply(&mut state, hand_off(Vec::new())));
    assert_eq!(apply(&mut state, Command::in_job(1, Command::CancelJob)), Response::Accepted);
    assert_eq!(apply(&mut state, hand_off(vec![receipt(&first)])), Response::JobCancelled);
}
