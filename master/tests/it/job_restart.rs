//! Training again under a job's name (`RestartJob`) and the leader's cancel of an idle job
//! (`CancelIdleJob`): a restart of an ended job makes one new incarnation, however often it
//! is retried or raced; of a running one it is a join; the old incarnation stays ended.

use master::state::{ClientStamp, Command, JobRef, MasterState, QueuePolicy, Request, Response};

use crate::support::checked;

fn policy() -> QueuePolicy {
    QueuePolicy {
        chunks_per_task: 1,
        task_timeout_min_ms: 1000,
        timeout_factor: 2,
        max_task_failures: 1,
        retry_failed_next_pass: true,
    }
}

fn index(job: &str, size: u64, passes: u32) -> Command {
    Command::ReportIndexDataset { job: job.into(), size, shard_size: 1, passes, policy: policy() }
}

fn in_job(job: &str, command: Command) -> Command {
    Command::InJob { job: JobRef::Name(job.into()), command: Box::new(command) }
}

/// Applies `command` at `now_ms` with `client`'s stamp (or none) and `term` for leader
/// decisions, and checks the invariants and the step.
fn apply_as(
    state: &mut MasterState,
    now_ms: u64,
    (client, term): (Option<ClientStamp>, Option<u64>),
    command: Command,
) -> Response {
    let before = state.clone();
    let response = state.apply(&Request { client, now_ms, term, command });
    checked("job restart", 0, &before, state);
    response
}

fn apply(state: &mut MasterState, now_ms: u64, command: Command) -> Response {
    apply_as(state, now_ms, (None, None), command)
}

fn stamp(client_id: u64, seq: u64) -> (Option<ClientStamp>, Option<u64>) {
    (Some(ClientStamp { client_id, seq }), None)
}

/// Runs job `name` (one trainer, tasks of one sample) until it finished.
fn finish(state: &mut MasterState, name: &str) {
    let Response::TrainerRegistered { trainer } =
        apply(state, 1, in_job(name, Command::RegisterTrainer { name: "t".into() }))
    else {
        panic!("the trainer registers");
    };
    for _ in 0..64 {
        let pass = state.job_named(name).expect("the job").status().pass;
        match apply(state, 2, in_job(name, Command::GetTask { trainer, pass })) {
            Response::Task(task) => {
                let done = Command::TaskFinished { task_id: task.task_id, epoch: task.epoch };
                assert_eq!(apply(state, 3, in_job(name, done)), Response::Accepted);
            }
            Response::JobFinished => return,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    panic!("job {name:?} did not finish");
}

fn newest_id(state: &MasterState, name: &str) -> u64 {
    let ids = state.jobs().filter(|(_, job)| job.name() == name).map(|(id, _)| id);
    ids.max().expect("a job of the name")
}

/// A restart of a finished job makes a new incarnation with a new id, which takes a report
/// with other passes; the old one stays finished; a second restart (another script) and a
/// retry of the first, before and after the new incarnation ended, make no third one.
#[test]
fn a_restart_of_an_ended_job_makes_one_new_incarnation() {
    let mut state = MasterState::new();
    assert!(matches!(apply(&mut state, 0, index("a", 2, 1)), Response::DatasetAccepted { .. }));
    finish(&mut state, "a");
    let old = newest_id(&state, "a");
    let again = apply(&mut state, 5, index("a", 2, 1));
    assert!(matches!(again, Response::DatasetAccepted { .. }), "without restart: the old job");
    assert_eq!(newest_id(&state, "a"), old, "a plain report makes no incarnation");

    let first = apply_as(&mut state, 10, stamp(7, 1), in_job("a", Command::RestartJob));
    let Response::JobRestarted { job_id: new } = first else { panic!("restarted: {first:?}") };
    assert!(new > old, "a new id");
    assert_eq!(newest_id(&state, "a"), new);
    let other_script = apply_as(&mut state, 11, stamp(8, 1), in_job("a", Command::RestartJob));
    assert_eq!(other_script, Response::Accepted, "the new incarnation runs: a join");
    let retry = apply_as(&mut state, 12, stamp(7, 1), in_job("a", Command::RestartJob));
    assert_eq!(retry, first, "a retry is answered, not applied again");

    let report = apply(&mut state, 13, index("a", 3, 2));
    assert_eq!(report, Response::DatasetAccepted { task_count: 3, passes: 2 }, "new passes");
    let old_job = state.job(old).expect("the old incarnation is retained");
    assert!(old_job.ended().is_some_and(|end| !end.cancelled), "it stays finished");
    finish(&mut state, "a");
    let late_retry = apply_as(&mut state, 20, stamp(7, 1), in_job("a", Command::RestartJob));
    assert_eq!(late_retry, first, "a retry after the new incarnation ended makes no third");
    assert_eq!(state.jobs().count(), 2);
    let next = apply_as(&mut state, 21, stamp(7, 2), in_job("a", Command::RestartJob));
    assert!(matches!(next, Response::JobRestarted { job_id } if job_id > new), "{next:?}");
}

/// A restart of a running job is a join that changes nothing; of a cancelled job, a new
/// incarnation; of no job, `NoSuchJob` (the report then makes the job); a restart never
/// reaches a job by id or the unnamed job.
#[test]
fn a_restart_joins_a_running_job_and_replaces_no_running_one() {
    let mut state = MasterState::new();
    let none = apply(&mut state, 0, in_job("a", Command::RestartJob));
    assert_eq!(none, Response::NoSuchJob { job: "a".into() });
    apply(&mut state, 0, index("a", 2, 1));
    let before = state.clone();
    assert_eq!(
        apply_as(&mut state, 1, stamp(3, 1), in_job("a", Command::RestartJob)),
        Response::Accepted
    );
    assert_eq!(state.jobs().count(), 1);
    assert_eq!(
        state.job_named("a").map(|job| job.status()),
        before.job_named("a").map(|job| job.status())
    );
    let old = newest_id(&state, "a");
    let by_id = Command::InJob { job: JobRef::Id(old), command: Box::new(Command::RestartJob) };
    assert!(matches!(apply(&mut state, 2, by_id), Response::Rejected { .. }));
    assert!(matches!(
        apply(&mut state, 2, in_job("", Command::RestartJob)),
        Response::Rejected { .. }
    ));

    assert_eq!(apply(&mut state, 3, in_job("a", Command::CancelJob)), Response::Accepted);
    let restarted = apply(&mut state, 4, in_job("a", Command::RestartJob));
    assert!(matches!(restarted, Response::JobRestarted { job_id } if job_id > old));
    assert!(state.job(old).is_some_and(|job| job.is_cancelled()), "the old one stays cancelled");
    let register = in_job("a", Command::RegisterTrainer { name: "t".into() });
    assert!(matches!(apply(&mut state, 5, register), Response::TrainerRegistered { .. }));
}

/// The leader's idle cancel ends a running job only if nothing was applied to it since it
/// judged it (its state clock), only in its term, and never touches an ended job.
#[test]
fn an_idle_job_is_cancelled_unless_touched_since_the_leaders_judgement() {
    let mut state = MasterState::new();
    apply(&mut state, 100, index("a", 2, 1));
    let id = newest_id(&state, "a");
    let clock_ms = state.job(id).expect("the job").clock_ms();
    let decision = |clock_ms| Command::CancelIdleJob { job: id, clock_ms };
    let touched =
        apply(&mut state, 200, in_job("a", Command::RegisterTrainer { name: "t".into() }));
    assert!(matches!(touched, Response::TrainerRegistered { .. }));
    let late = apply_as(&mut state, 300, (None, Some(1)), decision(clock_ms));
    assert_eq!(late, Response::Stale, "touched since the judgement");
    assert!(state.job(id).is_some_and(|job| job.ended().is_none()));

    let clock_ms = state.job(id).expect("the job").clock_ms();
    let mut other_term = state.clone();
    let request = Request { client: None, now_ms: 400, term: Some(1), command: decision(clock_ms) };
    let refused = other_term.apply_in_term(&request, 2);
    assert_eq!(refused, Response::WrongTerm { decided: 1, committed: 2 });
    let cancelled = apply_as(&mut state, 400, (None, Some(1)), decision(clock_ms));
    assert_eq!(cancelled, Response::Accepted);
    let end = state.job(id).and_then(|job| job.ended()).expect("ended");
    assert!(end.cancelled && end.at_ms == 400, "{end:?}");
    let clock_ms = state.job(id).expect("the job").clock_ms();
    assert_eq!(apply_as(&mut state, 500, (None, Some(1)), decision(clock_ms)), Response::Stale);
    let gone = Command::CancelIdleJob { job: 99, clock_ms: 0 };
    assert_eq!(
        apply_as(&mut state, 500, (None, Some(1)), gone),
        Response::NoSuchJob { job: "#99".into() }
    );
}
