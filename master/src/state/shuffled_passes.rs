//! Tests of shuffled jobs through the whole state machine: each pass hands its tasks out in
//! the permutation of (seed, pass), a restore replays it, requeued tasks still come back, and
//! the seed is part of the job's definition.

use client::shuffle::task_rank;

use super::command::Command;
use super::dataset::test_policy;
use super::master_state::MasterState;
use super::request::Request;
use super::response::Response;

const TASKS: u64 = 20;
const PASSES: u32 = 3;

fn report(shuffle: Option<u64>) -> Command {
    let report = Command::ReportIndexDataset {
        job: "j".into(),
        size: TASKS,
        shard_size: 1,
        passes: PASSES,
        policy: test_policy(),
    };
    match shuffle {
        Some(seed) => Command::ShuffledReport { seed, report: Box::new(report) },
        None => report,
    }
}

fn apply(state: &mut MasterState, command: Command) -> Response {
    state.apply(&Request { client: None, now_ms: 10, term: None, command })
}

/// A group with job "j" reported with `shuffle` and trainer 1 registered in it.
fn started(shuffle: Option<u64>) -> MasterState {
    let mut state = MasterState::new();
    assert!(matches!(apply(&mut state, report(shuffle)), Response::DatasetAccepted { .. }));
    let register = Command::RegisterTrainer { name: "t".into() };
    assert_eq!(
        apply(&mut state, Command::in_job(1, register)),
        Response::TrainerRegistered { trainer: 1 }
    );
    state
}

/// Runs one pass to its end with trainer 1 and returns the tasks in dispatch order.
fn run_pass(state: &mut MasterState, pass: u32) -> Vec<u64> {
    let mut order = Vec::new();
    loop {
        let asked = Command::in_job(1, Command::GetTask { trainer: 1, pass });
        let assignment = match apply(state, asked) {
            Response::Task(assignment) => assignment,
            Response::PassBefore { .. } | Response::JobFinished => return order,
            other => panic!("pass {pass}: {other:?}"),
        };
        order.push(assignment.task_id);
        let (task_id, epoch) = (assignment.task_id, assignment.epoch);
        let finished = Command::in_job(1, Command::TaskFinished { task_id, epoch });
        assert_eq!(apply(state, finished), Response::Accepted);
    }
}

/// The order the masters should hand out pass `pass` of `tasks` in.
fn expected(seed: u64, pass: u32, mut tasks: Vec<u64>) -> Vec<u64> {
    tasks.sort_by_key(|task_id| task_rank(seed, pass, *task_id));
    tasks
}

/// Every pass hands out every task once, in the permutation of (seed, pass): another one each
/// pass, the same one for the same seed, and by id without a seed.
#[test]
fn passes_follow_the_seeds_permutation() {
    let mut state = started(Some(42));
    let passes: Vec<Vec<u64>> = (0..PASSES).map(|pass| run_pass(&mut state, pass)).collect();
    for (pass, order) in passes.iter().enumerate() {
        assert_eq!(*order, expected(42, pass as u32, (0..TASKS).collect()), "pass {pass}");
    }
    assert_ne!(passes[0], passes[1], "each pass has its own order");
    assert_ne!(passes[0], (0..TASKS).collect::<Vec<_>>(), "shuffled");
    let mut again = started(Some(42));
    assert_eq!(run_pass(&mut again, 0), passes[0], "the same seed, the same order");
    let mut plain = started(None);
    assert_eq!(run_pass(&mut plain, 0), (0..TASKS).collect::<Vec<_>>(), "no seed: by id");
}

/// A restore to a progress checkpoint hands the rest of its pass out in that pass's order
/// again, and a snapshot taken mid-pass goes on in the same order.
#[test]
fn a_restore_and_a_snapshot_replay_the_order() {
    let mut state = started(Some(7));
    run_pass(&mut state, 0);
    assert!(matches!(
        apply(&mut state, Command::in_job(1, Command::CheckpointJob)),
        Response::ProgressCheckpointed { .. }
    ));
    let first = run_pass(&mut state, 1);
    assert_eq!(first, expected(7, 1, (0..TASKS).collect()));
    let restore = Command::in_job(1, Command::RestoreJob { checkpoint: 1 });
    assert!(matches!(apply(&mut state, restore), Response::ProgressRestored { pass: 1, .. }));
    let snapshot = MasterState::decode(&state.encode()).expect("the snapshot decodes");
    assert_eq!(snapshot, state, "the seed and the ordered queue are in the snapshot");
    let mut restored = snapshot;
    assert_eq!(run_pass(&mut restored, 1), first, "the restore replays the pass's order");
}

/// A task that timed out goes to the back of the pass, as in an unshuffled job; every task is
/// still handed out and finished once in the pass.
#[test]
fn requeued_tasks_come_back_at_the_end() {
    let mut state = started(Some(3));
    let order = expected(3, 0, (0..TASKS).collect());
    let asked = Command::in_job(1, Command::GetTask { trainer: 1, pass: 0 });
    let Response::Task(first) = apply(&mut state, asked) else { panic!("a task") };
    assert_eq!(first.task_id, order[0]);
    let later = Request {
        client: None,
        now_ms: 1_000_000,
        term: None,
        command: Command::in_job(1, Command::ExpireTasks),
    };
    assert!(matches!(state.apply(&later), Response::Expired { .. }));
    let rest = run_pass(&mut state, 0);
    let mut again: Vec<u64> = order[1..].to_vec();
    again.push(order[0]);
    assert_eq!(rest, again);
}

/// The seed is part of the job: a report with the same seed is a repeat, one with another
/// seed or none is refused naming both.
#[test]
fn another_seed_is_refused_naming_both() {
    let mut state = started(Some(5));
    assert!(matches!(apply(&mut state, report(Some(5))), Response::DatasetAccepted { .. }));
    let refused = |response| match response {
        Response::Rejected { reason } => reason,
        other => panic!("refused, not {other:?}"),
    };
    let other = refused(apply(&mut state, report(Some(6))));
    assert!(other.contains("shuffle seed 6") && other.contains("shuffle seed 5"), "{other}");
    let none = refused(apply(&mut state, report(None)));
    assert!(none.contains("no shuffle") && none.contains("shuffle seed 5"), "{none}");
    let mut plain = started(None);
    let seeded = refused(apply(&mut plain, report(Some(5))));
    assert!(seeded.contains("shuffle seed 5") && seeded.contains("no shuffle"), "{seeded}");
}

/// A `ShuffledReport` wraps a dataset report and nothing else.
#[test]
fn only_reports_are_shuffled() {
    let mut state = started(Some(5));
    let wrapped = Command::ShuffledReport { seed: 1, report: Box::new(Command::CancelJob) };
    assert!(matches!(apply(&mut state, Command::in_job(1, wrapped)), Response::Rejected { .. }));
}
