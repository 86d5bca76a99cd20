//! Progress checkpoints with the model: the pservers' own checkpoints tagged with a progress
//! checkpoint's id (asked by heartbeats, kept for the newest few), and a restore that reloads
//! every slot's before the queue goes back, handing out no task meanwhile.

use master::state::{
    CheckpointMeta, ChunkRef, Command, JobRef, JobState, MasterState, Request, Response,
    SlotSecret, MODEL_TAGS_KEPT,
};

use crate::jobs::policy;
use crate::support::checked;

fn in_job(command: Command) -> Command {
    Command::InJob { job: JobRef::Name("a".into()), command: Box::new(command) }
}

/// Applies `command` to job "a" at `now_ms`, checking the invariants and the step.
fn apply(state: &mut MasterState, now_ms: u64, command: Command) -> Response {
    let before = state.clone();
    let request = Request { client: None, now_ms, term: None, command: in_job(command) };
    let response = state.apply(&request);
    checked("model restore", 0, &before, state);
    response
}

fn job(state: &MasterState) -> &JobState {
    state.job_named("a").expect("job a exists")
}

/// A job of 4 tasks and 2 passes, a trainer (id 1), and 2 pserver slots held under
/// generations 1 and 2.
fn job_with_two_slots() -> MasterState {
    let mut state = MasterState::new();
    let chunk = |offset| ChunkRef { path: "f".into(), offset, compressed_size: 1, record_count: 1 };
    let chunks = (0..4).map(chunk).collect();
    let report = Command::ReportDataset { job: "a".into(), chunks, passes: 2, policy: policy() };
    let request = Request { client: None, now_ms: 0, term: None, command: report };
    assert!(matches!(state.apply(&request), Response::DatasetAccepted { .. }));
    apply(&mut state, 0, Command::RegisterTrainer { name: "t".into() });
    for slot in 0..2u32 {
        let secret = SlotSecret::from_bits(u128::from(slot) + 7);
        let claim =
            Command::ClaimPServerSlotWithSecret { addr: format!("p{slot}:1"), desired: 2, secret };
        assert!(matches!(apply(&mut state, 0, claim), Response::SlotClaimed { .. }));
    }
    state
}

/// The file slot `index` of `generation` writes at `step` for progress checkpoint `progress`.
fn tag_file(slot: u32, generation: u64, step: u64, progress: u64) -> CheckpointMeta {
    let name = storage::checkpoint::file_name(slot, step, generation);
    CheckpointMeta {
        path: format!("/ckpt/progress-x-{progress}/{name}"),
        step,
        crc32: 9,
        created_ms: 1,
    }
}

fn tag(
    state: &mut MasterState,
    (slot, generation): (u32, u64),
    progress: u64,
    step: u64,
) -> Response {
    let meta = tag_file(slot, generation, step, progress);
    apply(state, 5, Command::TagSlotCheckpoint { slot, generation, progress, meta })
}

/// [`job_with_two_slots`] with one task done, progress checkpoint 1 tagged by both slots, and
/// one more task done after it.
fn tagged_then_trained() -> MasterState {
    let mut state = job_with_two_slots();
    finish_one(&mut state);
    apply(&mut state, 30, Command::CheckpointProgress);
    tag(&mut state, (0, 1), 1, 3);
    tag(&mut state, (1, 2), 1, 4);
    finish_one(&mut state);
    state
}

fn finish_one(state: &mut MasterState) -> u64 {
    let pass = job(state).status().pass;
    let Response::Task(task) = apply(state, 10, Command::GetTask { trainer: 1, pass }) else {
        panic!("a task is handed out")
    };
    let report = Command::TaskFinished { task_id: task.task_id, epoch: task.epoch };
    assert_eq!(apply(state, 20, report), Response::Accepted);
    task.task_id
}

/// A progress checkpoint asks every slot (by heartbeat) for its own checkpoint until it
/// recorded one; it is the job's model checkpoint once every slot has; a tag from a fenced-off
/// holder or for a progress checkpoint that keeps none is refused.
#[test]
fn heartbeats_ask_every_slot_to_tag_the_newest_progress_checkpoint() {
    let mut state = job_with_two_slots();
    finish_one(&mut state);
    let taken = apply(&mut state, 30, Command::CheckpointProgress);
    assert_eq!(taken, Response::ProgressCheckpointed { id: 1, pass: 0, done: 1 });
    assert_eq!(job(&state).slot_asks(0).tag_for, Some(1));
    assert_eq!(tag(&mut state, (0, 1), 1, 3), Response::Accepted);
    assert_eq!(job(&state).slot_asks(0).tag_for, None, "slot 0 recorded its own");
    assert_eq!(job(&state).slot_asks(1).tag_for, Some(1));
    assert_eq!(job(&state).newest_model_checkpoint(), None, "slot 1 has not recorded yet");
    assert_eq!(tag(&mut state, (1, 1), 1, 3), Response::SlotNotHeld, "generation 1 is slot 0's");
    assert!(matches!(tag(&mut state, (1, 2), 7, 3), Response::Rejected { .. }));
    assert_eq!(tag(&mut state, (1, 2), 1, 4), Response::Accepted);
    assert_eq!(job(&state).newest_model_checkpoint(), Some(1));
    assert_eq!(tag(&mut state, (1, 2), 1, 9), Response::Accepted, "a repeat keeps the first");

    for _ in 0..MODEL_TAGS_KEPT {
        apply(&mut state, 40, Command::CheckpointProgress);
    }
    let asks = job(&state).slot_asks(0);
    assert_eq!((asks.tag_for, asks.tags_from), (Some(5), 2), "checkpoint 1 keeps no files now");
    assert_eq!(job(&state).newest_model_checkpoint(), None);
    let old = apply(&mut state, 41, Command::RestoreProgress { checkpoint: 1, data_only: false });
    assert!(matches!(old, Response::Rejected { ref reason } if reason.contains("--data-only")));
}

/// A restore with the model reloads every held slot before the queue goes back: no task is
/// handed out and a waiting slot's records are refused meanwhile; a slot that changes hands
/// waits no more (its new holder restores from the tagged file); the last reload puts the
/// queue back to exactly the checkpoint.
#[test]
fn a_restore_reloads_every_slot_before_the_queue_goes_back() {
    let mut state = job_with_two_slots();
    let done_before = finish_one(&mut state);
    apply(&mut state, 30, Command::CheckpointProgress);
    let partial =
        apply(&mut state, 31, Command::RestoreProgress { checkpoint: 1, data_only: false });
    assert!(
        matches!(partial, Response::Rejected { ref reason } if reason.contains("slots [0, 1]"))
    );
    tag(&mut state, (0, 1), 1, 3);
    tag(&mut state, (1, 2), 1, 4);
    finish_one(&mut state);
    finish_one(&mut state);

    let restore =
        apply(&mut state, 50, Command::RestoreProgress { checkpoint: 1, data_only: false });
    assert_eq!(restore, Response::RestoreWaiting { pass: 0, pservers: 2 });
    assert_eq!(job(&state).reloads_waiting(), 2);
    assert_eq!(
        apply(&mut state, 51, Command::GetTask { trainer: 1, pass: 0 }),
        Response::NoMoreAvailable
    );
    let reload = job(&state).slot_asks(0).reload.expect("slot 0 is asked to reload");
    assert_eq!((reload.restore, reload.from.clone()), (1, tag_file(0, 1, 3, 1)));
    assert_eq!(job(&state).slot_asks(0).tag_for, None, "nothing is tagged during a restore");
    let old_file = CheckpointMeta {
        path: storage::checkpoint::file_name(0, 99, 1),
        step: 99,
        crc32: 1,
        created_ms: 1,
    };
    let record = Command::RecordCheckpoint { slot: 0, generation: 1, meta: old_file };
    assert_eq!(apply(&mut state, 52, record), Response::Stale, "of the model being replaced");
    let busy = apply(&mut state, 52, Command::CheckpointProgress);
    assert!(matches!(busy, Response::Rejected { .. }), "no checkpoint during a restore");

    let reloaded = Command::SlotReloaded { slot: 0, generation: 1, restore: 1 };
    assert_eq!(apply(&mut state, 53, reloaded.clone()), Response::Accepted);
    assert_eq!(apply(&mut state, 53, reloaded), Response::Stale, "a repeat changes nothing");
    assert_eq!(job(&state).reloads_waiting(), 1);
    // Slot 1's holder goes: its slot waits no more, and that was the last.
    apply(&mut state, 54, Command::ReleasePServerSlot { slot: 1, generation: 2 });
    assert_eq!(job(&state).reloads_waiting(), 0);
    let status = job(&state).status();
    assert_eq!((status.pass, status.done_count, status.todo_count), (0, 1, 3));
    let claim = Command::ClaimPServerSlotWithSecret {
        addr: "p9:1".into(),
        desired: 2,
        secret: SlotSecret::from_bits(99),
    };
    let Response::SlotClaimed { slot: 1, checkpoint, .. } = apply(&mut state, 55, claim) else {
        panic!("slot 1 is claimed again")
    };
    assert_eq!(checkpoint, Some(tag_file(1, 2, 4, 1)), "its new holder restores the tagged file");
    let redone = finish_one(&mut state);
    assert_ne!(redone, done_before, "the task done at the checkpoint is not redone");
}

/// A restore of the data only needs no pserver checkpoints and leaves the slots alone; it
/// also replaces a restore with the model under way.
#[test]
fn a_data_only_restore_needs_no_pserver_checkpoints() {
    let mut state = tagged_then_trained();
    let with_model = Command::RestoreProgress { checkpoint: 1, data_only: false };
    assert!(matches!(apply(&mut state, 40, with_model), Response::RestoreWaiting { .. }));
    let data_only = Command::RestoreProgress { checkpoint: 1, data_only: true };
    assert_eq!(apply(&mut state, 41, data_only), Response::ProgressRestored { pass: 0, todo: 3 });
    assert_eq!(job(&state).reloads_waiting(), 0);
    assert_eq!(job(&state).slot_asks(0).reload, None);
    finish_one(&mut state);
}

/// A cancel made while a restore waits for its pservers is final: the pservers exit, their
/// slots are released a lease later, and the last release puts nothing back; the job stays
/// cancelled, no restore waits, and neither a restore nor a release can run it again.
#[test]
fn a_cancel_during_a_restore_stays_cancelled() {
    let mut state = tagged_then_trained();
    let restore = Command::RestoreProgress { checkpoint: 1, data_only: false };
    assert_eq!(
        apply(&mut state, 50, restore.clone()),
        Response::RestoreWaiting { pass: 0, pservers: 2 }
    );

    assert_eq!(apply(&mut state, 51, Command::CancelJob), Response::Accepted);
    assert_eq!(job(&state).reloads_waiting(), 0, "the cancel ends the restore");
    assert_eq!(job(&state).slot_asks(0).reload, None, "no holder is asked to reload");
    for (slot, generation) in [(0, 1), (1, 2)] {
        apply(&mut state, 60, Command::ReleasePServerSlot { slot, generation });
    }
    assert!(job(&state).is_cancelled(), "the last release put nothing back");
    assert_eq!(apply(&mut state, 61, restore), Response::JobCancelled);
    let data_only = Command::RestoreProgress { checkpoint: 1, data_only: true };
    assert_eq!(apply(&mut state, 61, data_only), Response::JobCancelled);
    assert!(job(&state).is_cancelled() && !job(&state).status().job_finished);
}

/// The last task, in flight when a restore with the model begins, reported finished while
/// the restore waits for its pservers: the report is taken, but the job does not end (the
/// restore puts the queue back once the pservers reloaded, and the job trains on from there).
#[test]
fn the_last_task_finished_while_a_restore_waits_does_not_end_the_job() {
    let mut state = tagged_then_trained();
    for _ in 0..5 {
        finish_one(&mut state);
    }
    let Response::Task(last) = apply(&mut state, 40, Command::GetTask { trainer: 1, pass: 1 })
    else {
        panic!("the last task is handed out")
    };
    let restore = Command::RestoreProgress { checkpoint: 1, data_only: false };
    assert_eq!(apply(&mut state, 50, restore), Response::RestoreWaiting { pass: 0, pservers: 2 });
    let report = Command::TaskFinished { task_id: last.task_id, epoch: last.epoch };
    assert_eq!(apply(&mut state, 51, report), Response::Accepted);
    assert_eq!(job(&state).ended(), None, "the job does not end while the restore waits");
    for (slot, generation) in [(0, 1), (1, 2)] {
        apply(&mut state, 52, Command::SlotReloaded { slot, generation, restore: 1 });
    }
    let status = job(&state).status();
    assert_eq!((status.pass, status.done_count, status.job_finished), (0, 1, false));
    assert_eq!(job(&state).ended(), None);
    finish_one(&mut state);
}

/// "Never lost" holds only for the holder a slot had at the progress checkpoint: one that
/// claimed the slot later restored an older file, which may miss tasks done by then. So a
/// slot that changed hands before its holder tagged leaves the checkpoint data-only: the new
/// holder is not asked for it, its tag is refused, the restore with the model is refused
/// naming the slot, and `newest_checkpoint_data_only` says so; a later checkpoint asks the new
/// holder as usual.
#[test]
fn a_slot_that_changed_hands_before_its_tag_leaves_the_checkpoint_data_only() {
    let mut state = job_with_two_slots();
    finish_one(&mut state);
    apply(&mut state, 30, Command::CheckpointProgress);
    assert_eq!(tag(&mut state, (0, 1), 1, 3), Response::Accepted);
    assert!(!job(&state).newest_checkpoint_data_only(), "slot 1's holder may still tag");

    tracing::info!("--- slot 1's holder dies before tagging; a replacement claims it");
    apply(&mut state, 40, Command::ReleasePServerSlot { slot: 1, generation: 2 });
    let claim = Command::ClaimPServerSlotWithSecret {
        addr: "p9:1".into(),
        desired: 2,
        secret: SlotSecret::from_bits(99),
    };
    let Response::SlotClaimed { slot: 1, generation, .. } = apply(&mut state, 41, claim) else {
        panic!("slot 1 is claimed again")
    };
    assert_eq!(job(&state).slot_asks(1).tag_for, None, "the new holder cannot cover it");
    assert!(matches!(tag(&mut state, (1, generation), 1, 5), Response::Rejected { .. }));
    assert!(job(&state).newest_checkpoint_data_only());
    let restore = Command::RestoreProgress { checkpoint: 1, data_only: false };
    let refused = apply(&mut state, 42, restore);
    assert!(
        matches!(refused, Response::Rejected { ref reason } if reason.contains("changed hands")),
        "{refused:?}"
    );

    tracing::info!("--- a new checkpoint asks the new holder");
    apply(&mut state, 50, Command::CheckpointProgress);
    assert_eq!(job(&state).slot_asks(1).tag_for, Some(2));
    assert_eq!(tag(&mut state, (1, generation), 2, 6), Response::Accepted);
    assert_eq!(tag(&mut state, (0, 1), 2, 7), Response::Accepted);
    assert_eq!(job(&state).newest_model_checkpoint(), Some(2));
    assert!(!job(&state).newest_checkpoint_data_only());
}
