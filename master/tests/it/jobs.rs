//! Named jobs in one group: isolation (a property: any interleaving of two jobs' commands
//! leaves each job exactly as its commands alone would), adoption of the unnamed job, cancel,
//! removal after the end, progress checkpoints and restores, and the group's limits.

use master::state::{
    ChunkRef, ClientStamp, Command, JobRef, JobState, MasterState, QueuePolicy, Request, Response,
    JOB_COUNT_MAX, PSERVER_COUNT_MAX, TASK_COUNT_MAX,
};
use proptest::prelude::*;

use crate::support::checked;

pub(crate) fn policy() -> QueuePolicy {
    QueuePolicy {
        chunks_per_task: 1,
        task_timeout_min_ms: 1000,
        timeout_factor: 2,
        max_task_failures: 1,
        retry_failed_next_pass: true,
    }
}

fn recordio(job: &str, chunk_count: u64, passes: u32) -> Command {
    let chunk = |offset| ChunkRef { path: "f".into(), offset, compressed_size: 1, record_count: 1 };
    let chunks = (0..chunk_count).map(chunk).collect();
    Command::ReportDataset { job: job.into(), chunks, passes, policy: policy() }
}

fn index(job: &str, size: u64, shard_size: u64, passes: u32) -> Command {
    Command::ReportIndexDataset { job: job.into(), size, shard_size, passes, policy: policy() }
}

fn in_job(job: &str, command: Command) -> Command {
    Command::InJob { job: JobRef::Name(job.into()), command: Box::new(command) }
}

/// Applies `command` (unstamped, at `now_ms`) and checks the invariants and the step.
fn apply(state: &mut MasterState, now_ms: u64, command: Command) -> Response {
    let before = state.clone();
    let response = state.apply(&Request { client: None, now_ms, term: None, command });
    checked("jobs", 0, &before, state);
    response
}

fn job<'a>(state: &'a MasterState, name: &str) -> &'a JobState {
    state.job_named(name).unwrap_or_else(|| panic!("job {name:?} exists"))
}

/// Takes tasks of `job` with trainer `trainer` and finishes them until `count` are done.
fn finish_tasks(state: &mut MasterState, name: &str, trainer: u64, count: usize) -> Vec<u64> {
    let mut finished = Vec::new();
    for _ in 0..count {
        let pass = job(state, name).status().pass;
        let Response::Task(task) =
            apply(state, 10, in_job(name, Command::GetTask { trainer, pass }))
        else {
            panic!("a task of {name} is handed out");
        };
        let report = Command::TaskFinished { task_id: task.task_id, epoch: task.epoch };
        assert_eq!(apply(state, 20, in_job(name, report)), Response::Accepted);
        finished.push(task.task_id);
    }
    finished
}

/// Two jobs of different kinds run side by side: each has its own trainers, tasks, slots and
/// evaluation, and nothing of one is found in the other.
#[test]
fn two_jobs_keep_their_own_members_tasks_and_evaluations() {
    let mut state = MasterState::new();
    assert!(matches!(apply(&mut state, 0, recordio("a", 3, 2)), Response::DatasetAccepted { .. }));
    assert!(matches!(
        apply(&mut state, 0, index("b", 100, 10, 1)),
        Response::DatasetAccepted { .. }
    ));
    let register = |name: &str| in_job(name, Command::RegisterTrainer { name: "t".into() });
    assert_eq!(apply(&mut state, 0, register("a")), Response::TrainerRegistered { trainer: 1 });
    assert_eq!(apply(&mut state, 0, register("b")), Response::TrainerRegistered { trainer: 1 });
    assert_eq!(apply(&mut state, 0, register("b")), Response::TrainerRegistered { trainer: 2 });
    let claim = |name: &str, addr: &str| {
        in_job(name, Command::ClaimPServerSlot { addr: addr.into(), desired: 1 })
    };
    assert!(matches!(apply(&mut state, 0, claim("a", "p:1")), Response::SlotClaimed { .. }));
    assert!(matches!(apply(&mut state, 0, claim("b", "p:2")), Response::SlotClaimed { .. }));

    tracing::info!("--- trainer 2 exists in b only; a's task reports do not reach b");
    let asked = apply(&mut state, 0, in_job("a", Command::GetTask { trainer: 2, pass: 0 }));
    assert_eq!(asked, Response::UnknownTrainer);
    finish_tasks(&mut state, "a", 1, 1);
    let stray = in_job("b", Command::TaskFinished { task_id: 0, epoch: 1 });
    assert_eq!(apply(&mut state, 30, stray), Response::Stale, "b never handed out task 0");
    let eval = Command::RecordEval { pass: 0, loss: 0.5, accuracy: 0.9 };
    assert_eq!(apply(&mut state, 30, in_job("a", eval)), Response::Accepted);

    let (a, b) = (job(&state, "a").status(), job(&state, "b").status());
    assert_eq!((a.task_count, a.done_count, a.trainers.len()), (3, 1, 1));
    assert_eq!((b.task_count, b.done_count, b.trainers.len()), (10, 0, 2));
    assert!(a.eval.is_some() && b.eval.is_none(), "the evaluation is a's only");
    assert_eq!(a.pservers[0].holder.as_ref().map(|h| h.addr.as_str()), Some("p:1"));
    assert_eq!(b.pservers[0].holder.as_ref().map(|h| h.addr.as_str()), Some("p:2"));

    tracing::info!("--- with two jobs, a client must name one");
    let unnamed = apply(&mut state, 30, in_job("", Command::RegisterTrainer { name: "x".into() }));
    assert!(matches!(unnamed, Response::Rejected { ref reason } if reason.contains("name one")));
    let missing = apply(&mut state, 30, in_job("c", Command::RegisterTrainer { name: "x".into() }));
    assert_eq!(missing, Response::NoSuchJob { job: "c".into() });
    assert_eq!(state.jobs().count(), 2, "nothing was made for the refused calls");
}

/// Members that name no job before any exists wait in an unnamed job; the first report names
/// it (as the one job of earlier builds was named), a second report makes a second job.
#[test]
fn the_first_report_adopts_the_unnamed_job() {
    let mut state = MasterState::new();
    let claim = Command::ClaimPServerSlot { addr: "p:1".into(), desired: 1 };
    assert!(matches!(apply(&mut state, 0, claim), Response::SlotClaimed { .. }));
    assert_eq!(state.jobs().map(|(_, job)| job.name()).collect::<Vec<_>>(), vec![""]);
    assert!(matches!(apply(&mut state, 0, recordio("a", 2, 1)), Response::DatasetAccepted { .. }));
    assert_eq!(job(&state, "a").pservers_desired(), Some(1), "the claim is a's");
    assert!(matches!(apply(&mut state, 0, index("b", 4, 2, 1)), Response::DatasetAccepted { .. }));
    assert_eq!(state.jobs().count(), 2);
    let report = in_job("a", recordio("b", 2, 1));
    let crossed = apply(&mut state, 0, report);
    assert!(
        matches!(crossed, Response::Rejected { ref reason } if reason.contains("sent for job"))
    );
}

/// A cancelled job answers its members `JobCancelled` (its leader's clean-up still applies),
/// and only an ended job is removed, by id, once: its name is then free for a new job.
#[test]
fn a_cancelled_job_stops_its_members_and_is_removed_after_it_ended() {
    let mut state = MasterState::new();
    apply(&mut state, 0, recordio("a", 4, 1));
    apply(&mut state, 0, in_job("a", Command::RegisterTrainer { name: "t".into() }));
    let Response::Task(task) =
        apply(&mut state, 0, in_job("a", Command::GetTask { trainer: 1, pass: 0 }))
    else {
        panic!("a task is handed out")
    };
    let id = state.jobs().next().map(|(id, _)| id).expect("one job");
    let running = Command::RemoveJob { job: id };
    assert!(matches!(apply(&mut state, 5, running), Response::Rejected { .. }), "running");
    assert_eq!(state.jobs_past_retention(0, 5), Vec::<u64>::new());

    assert_eq!(apply(&mut state, 10, in_job("a", Command::CancelJob)), Response::Accepted);
    assert_eq!(apply(&mut state, 11, in_job("a", Command::CancelJob)), Response::Accepted);
    let get = in_job("a", Command::GetTask { trainer: 1, pass: 0 });
    assert_eq!(apply(&mut state, 12, get), Response::JobCancelled);
    let report = in_job("a", Command::TaskFinished { task_id: task.task_id, epoch: task.epoch });
    assert_eq!(apply(&mut state, 12, report), Response::JobCancelled);
    let lost = in_job("a", Command::TrainerLost { trainer: 1 });
    assert!(matches!(apply(&mut state, 13, lost), Response::TrainerRemoved { .. }));
    assert!(!state.has_expired(u64::MAX), "nothing of a cancelled job expires");
    let end = job(&state, "a").ended().expect("ended");
    assert!(end.cancelled && end.at_ms == 10, "{end:?}");

    assert_eq!(state.jobs_past_retention(100, 13), Vec::<u64>::new(), "kept for its retention");
    assert_eq!(state.jobs_past_retention(3, 13), vec![id]);
    // The state's clock stands still while the group is idle; the leader's wall clock does not.
    assert_eq!(state.jobs_past_retention(100, 109), Vec::<u64>::new());
    assert_eq!(state.jobs_past_retention(100, 110), vec![id], "counted on the wall clock");
    assert_eq!(apply(&mut state, 14, Command::RemoveJob { job: id }), Response::JobRemoved);
    let again = apply(&mut state, 15, Command::RemoveJob { job: id });
    assert_eq!(again, Response::NoSuchJob { job: format!("#{id}") });
    assert!(matches!(apply(&mut state, 16, recordio("a", 2, 1)), Response::DatasetAccepted { .. }));
    let (new_id, _) = state.jobs().next().expect("the new job");
    assert!(new_id > id, "ids are never reused");
    let stale_decision =
        Command::InJob { job: JobRef::Id(id), command: Box::new(Command::ExpireTasks) };
    assert!(matches!(apply(&mut state, 17, stale_decision), Response::NoSuchJob { .. }));
}

/// A progress checkpoint records the pass and its done tasks; a restore puts the queue back
/// there (the tasks done after it are done again), twice gives the same queue, reports of
/// tasks pending before it are stale, and a finished job never runs again.
#[test]
fn restoring_a_progress_checkpoint_redoes_what_was_done_after_it() {
    let mut state = MasterState::new();
    apply(&mut state, 0, recordio("a", 4, 2));
    apply(&mut state, 0, in_job("a", Command::RegisterTrainer { name: "t".into() }));
    let before = finish_tasks(&mut state, "a", 1, 2);
    let taken = apply(&mut state, 30, in_job("a", Command::CheckpointJob));
    assert_eq!(taken, Response::ProgressCheckpointed { id: 1, pass: 0, done: 2 });
    let after = finish_tasks(&mut state, "a", 1, 3);
    assert_eq!(job(&state, "a").status().pass, 1, "pass 0 ended after the checkpoint");
    let Response::Task(pending) =
        apply(&mut state, 40, in_job("a", Command::GetTask { trainer: 1, pass: 1 }))
    else {
        panic!("a task of pass 1")
    };

    let restore = || in_job("a", Command::RestoreJob { checkpoint: 1 });
    assert_eq!(apply(&mut state, 50, restore()), Response::ProgressRestored { pass: 0, todo: 2 });
    let once = job(&state, "a").clone();
    assert_eq!(apply(&mut state, 50, restore()), Response::ProgressRestored { pass: 0, todo: 2 });
    let twice = job(&state, "a");
    assert_eq!(twice.status(), once.status(), "restoring again changes nothing");
    let late =
        in_job("a", Command::TaskFinished { task_id: pending.task_id, epoch: pending.epoch });
    assert_eq!(apply(&mut state, 51, late), Response::Stale, "pending before the restore");
    let unknown = apply(&mut state, 51, in_job("a", Command::RestoreJob { checkpoint: 9 }));
    assert!(matches!(unknown, Response::Rejected { ref reason } if reason.contains("kept: [1]")));

    tracing::info!("--- pass 0 again: exactly the tasks not done at the checkpoint");
    let redone = finish_tasks(&mut state, "a", 1, 2);
    let mut expected: Vec<u64> = (0..4).filter(|task_id| !before.contains(task_id)).collect();
    let mut redone_sorted = redone.clone();
    redone_sorted.sort_unstable();
    expected.sort_unstable();
    assert_eq!(redone_sorted, expected, "after the checkpoint: {after:?}");
    finish_tasks(&mut state, "a", 1, 4);
    assert!(job(&state, "a").job_finished() && job(&state, "a").ended().is_some());
    let refused = apply(&mut state, 60, restore());
    assert!(
        matches!(refused, Response::Rejected { ref reason } if reason.contains("finished")),
        "{refused:?}"
    );
    assert!(job(&state, "a").ended().is_some(), "a finished job never runs again");
}

/// The group admits no more jobs than it keeps, no more slots or tasks than one job could
/// have alone, and a refused report makes no job.
#[test]
fn the_group_limits_hold_across_jobs() {
    let mut state = MasterState::new();
    for index in 0..JOB_COUNT_MAX {
        let report = index_report(&format!("j{index}"), 1);
        assert!(matches!(apply(&mut state, 0, report), Response::DatasetAccepted { .. }));
    }
    let over = apply(&mut state, 0, index_report("over", 1));
    assert!(matches!(over, Response::Rejected { ref reason } if reason.contains("jobs")));
    // Ended jobs never block a new one: the one that ended first makes room.
    assert_eq!(apply(&mut state, 5, in_job("j7", Command::CancelJob)), Response::Accepted);
    assert_eq!(apply(&mut state, 6, in_job("j3", Command::CancelJob)), Response::Accepted);
    assert!(matches!(
        apply(&mut state, 7, index_report("new", 1)),
        Response::DatasetAccepted { .. }
    ));
    assert_eq!(state.jobs().count(), JOB_COUNT_MAX);
    assert!(state.job_named("j7").is_none(), "the job that ended first made room");
    assert!(state.job_named("j3").is_some_and(|job| job.is_cancelled()), "the other is kept");

    let mut state = MasterState::new();
    apply(&mut state, 0, index_report("big", TASK_COUNT_MAX - 5));
    let over = apply(&mut state, 0, index_report("small", 6));
    assert!(matches!(over, Response::Rejected { ref reason } if reason.contains("tasks")));
    assert!(matches!(
        apply(&mut state, 0, index_report("small", 5)),
        Response::DatasetAccepted { .. }
    ));
    let claim = |name: &str, desired| {
        in_job(name, Command::ClaimPServerSlot { addr: format!("{name}:1"), desired })
    };
    let first = apply(&mut state, 0, claim("big", PSERVER_COUNT_MAX - 1));
    assert!(matches!(first, Response::SlotClaimed { .. }));
    let over = apply(&mut state, 0, claim("small", 2));
    assert!(matches!(over, Response::Rejected { ref reason } if reason.contains("pserver slots")));
    assert!(matches!(apply(&mut state, 0, claim("small", 1)), Response::SlotClaimed { .. }));
    assert_eq!(state.jobs().count(), 2);

    // A size near u64::MAX is refused, never summed into an overflow (a panic in `apply`
    // would be replayed at every restart).
    let huge = apply(&mut state, 0, index("huge", u64::MAX, 1, 1));
    assert!(
        matches!(huge, Response::Rejected { ref reason } if reason.contains("tasks")),
        "{huge:?}"
    );
}

/// An index report of `tasks` one-index tasks.
fn index_report(name: &str, tasks: u64) -> Command {
    index(name, tasks, 1, 1)
}

/// One step of a job in the isolation property.
#[derive(Debug, Clone)]
enum Op {
    Register { client: u64 },
    Get { client: u64, trainer: u64, pass_offset: u32 },
    Finish { client: u64, pick: usize },
    Fail { client: u64, pick: usize },
    Expire,
    Lost { trainer: u64 },
    Claim { client: u64, addr: u8 },
    Checkpoint,
    Restore { id: u64 },
    Eval { pass: u32 },
    Advance { ms: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u64..3).prop_map(|client| Op::Register { client }),
        8 => (1u64..3, 0u64..4, 0u32..3)
            .prop_map(|(client, trainer, pass_offset)| Op::Get { client, trainer, pass_offset }),
        6 => (1u64..3, any::<usize>()).prop_map(|(client, pick)| Op::Finish { client, pick }),
        2 => (1u64..3, any::<usize>()).prop_map(|(client, pick)| Op::Fail { client, pick }),
        2 => Just(Op::Expire),
        1 => (0u64..4).prop_map(|trainer| Op::Lost { trainer }),
        1 => (1u64..3, 0u8..3).prop_map(|(client, addr)| Op::Claim { client, addr }),
        1 => Just(Op::Checkpoint),
        1 => (0u64..4).prop_map(|id| Op::Restore { id }),
        1 => (0u32..3).prop_map(|pass| Op::Eval { pass }),
        3 => (0u64..3000).prop_map(|ms| Op::Advance { ms }),
    ]
}

/// Turns one job's ops into requests from that job's own history only (its clock, its
/// clients' sequence numbers, the tasks it was handed), so the same ops make the same
/// requests whether or not another job runs beside it.
struct JobDriver {
    name: &'static str,
    /// Client ids are the job's own: `client_base + client`.
    client_base: u64,
    now_ms: u64,
    seqs: [u64; 3],
    assignments: Vec<(u64, u64)>,
    pass: u32,
}

impl JobDriver {
    fn new(name: &'static str, client_base: u64) -> Self {
        Self { name, client_base, now_ms: 0, seqs: [0; 3], assignments: Vec::new(), pass: 0 }
    }

    fn request(&mut self, op: &Op) -> Option<Request> {
        let (client, command) = match op.clone() {
            Op::Register { client } => {
                (Some(client), Command::RegisterTrainer { name: "t".into() })
            }
            Op::Get { client, trainer, pass_offset } => {
                let pass = (self.pass + pass_offset).saturating_sub(1);
                (Some(client), Command::GetTask { trainer, pass })
            }
            Op::Finish { client, pick } => {
                let (task_id, epoch) = self.target(pick);
                (Some(client), Command::TaskFinished { task_id, epoch })
            }
            Op::Fail { client, pick } => {
                let (task_id, epoch) = self.target(pick);
                (Some(client), Command::TaskFailed { task_id, epoch, reason: "bad".into() })
            }
            Op::Expire => (None, Command::ExpireTasks),
            Op::Lost { trainer } => (None, Command::TrainerLost { trainer }),
            Op::Claim { client, addr } => {
                let addr = format!("{}{addr}:1", self.name);
                (Some(client), Command::ClaimPServerSlot { addr, desired: 2 })
            }
            Op::Checkpoint => (Some(1), Command::CheckpointJob),
            Op::Restore { id } => (Some(1), Command::RestoreJob { checkpoint: id }),
            Op::Eval { pass } => (Some(2), Command::RecordEval { pass, loss: 1.0, accuracy: 0.5 }),
            Op::Advance { ms } => {
                self.now_ms += ms;
                return None;
            }
        };
        let client = client.map(|client| {
            let index = usize::try_from(client).expect("small");
            self.seqs[index] += 1;
            ClientStamp { client_id: self.client_base + client, seq: self.seqs[index] }
        });
        let command = in_job(self.name, command);
        Some(Request { client, now_ms: self.now_ms, term: None, command })
    }

    fn target(&self, pick: usize) -> (u64, u64) {
        let picked = self.assignments.get(pick % self.assignments.len().max(1));
        picked.copied().unwrap_or((0, 1))
    }

    fn observe(&mut self, response: &Response) {
        match response {
            Response::Task(task) => self.assignments.push((task.task_id, task.epoch)),
            Response::PassBefore { current } | Response::PassAfter { current } => {
                self.pass = *current
            }
            _ => {}
        }
    }
}

/// The job's dataset, reported first.
fn dataset(name: &str, index_job: bool) -> Request {
    let command = if index_job { index(name, 11, 2, 2) } else { recordio(name, 6, 2) };
    Request { client: None, now_ms: 0, term: None, command }
}

/// Runs `ops` of job `name` alone in a fresh group: its answers and its final state.
fn alone(name: &'static str, base: u64, index_job: bool, ops: &[Op]) -> (Vec<Response>, JobState) {
    let mut state = MasterState::new();
    state.apply(&dataset(name, index_job));
    let mut driver = JobDriver::new(name, base);
    let mut answers = Vec::new();
    for op in ops {
        let Some(request) = driver.request(op) else { continue };
        let response = state.apply(&request);
        driver.observe(&response);
        answers.push(response);
    }
    (answers, job(&state, name).clone())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Any interleaving of two jobs' commands leaves each job exactly as its commands alone
    /// would, with the same answers: no task, trainer, slot, session or evaluation crosses
    /// jobs. The group keeps its invariants at every step.
    #[test]
    fn jobs_are_isolated(
        a_ops in proptest::collection::vec(op(), 1..80),
        b_ops in proptest::collection::vec(op(), 1..80),
        turns in proptest::collection::vec(any::<bool>(), 160),
        a_index in any::<bool>(),
    ) {
        let mut state = MasterState::new();
        state.apply(&dataset("a", a_index));
        state.apply(&dataset("b", !a_index));
        let mut drivers = [JobDriver::new("a", 0), JobDriver::new("b", 100)];
        let mut answers: [Vec<Response>; 2] = [Vec::new(), Vec::new()];
        let mut next = [0usize; 2];
        let ops = [&a_ops, &b_ops];
        for turn in turns.iter().map(|b| usize::from(*b)).chain([0, 1].into_iter().cycle().take(160)) {
            let Some(op) = ops[turn].get(next[turn]) else { continue };
            next[turn] += 1;
            let Some(request) = drivers[turn].request(op) else { continue };
            let before = state.clone();
            let response = state.apply(&request);
            checked("interleaved jobs", next[turn], &before, &state);
            drivers[turn].observe(&response);
            answers[turn].push(response);
        }
        prop_assert_eq!(next, [a_ops.len(), b_ops.len()], "every op was applied");
        let (a_alone, a_state) = alone("a", 0, a_index, &a_ops);
        let (b_alone, b_state) = alone("b", 100, !a_index, &b_ops);
        prop_assert_eq!(&answers[0], &a_alone);
        prop_assert_eq!(&answers[1], &b_alone);
        prop_assert_eq!(job(&state, "a"), &a_state);
        prop_assert_eq!(job(&state, "b"), &b_state);
        let decoded = MasterState::decode(&state.encode()).expect("the group's snapshot decodes");
        prop_assert_eq!(decoded, state);
    }
}
