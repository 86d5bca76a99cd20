//! What applying a command answers: expected outcomes and errors a person can act on.
//!
//! None of these is fatal: every response is a normal result of a committed entry, recorded for
//! exactly-once replies. Fatal problems (bytes that do not decode) are `DecodeError`s.

use serde::{Deserialize, Serialize};

use super::codec::{self, DecodeError, REQUEST_BYTES_MAX};
use super::pserver_slots::CheckpointMeta;
use super::rendezvous_op::RendezvousReply;

/// The answer to one applied command.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// The dataset is the job's (first report, or the same one again).
    DatasetAccepted { task_count: u64, passes: u32 },
    /// A task to process: the trainer reports back with its `task_id` and `epoch`.
    Task(TaskAssignment),
    /// The trainer asked for a pass that is already over; `current` is running.
    PassBefore { current: u32 },
    /// The trainer asked for a pass that has not started; it waits for `current` to end.
    PassAfter { current: u32 },
    /// Every task of this pass is dispatched but some are still pending: ask again later.
    NoMoreAvailable,
    /// Every pass is over.
    JobFinished,
    /// No dataset was reported yet.
    NoDataset,
    /// The trainer is not (or no longer) registered: it must register again.
    UnknownTrainer,
    /// The command took effect.
    Accepted,
    /// The report is fenced off (its task epoch is not the pending one, or a newer checkpoint
    /// is already recorded): acknowledged, nothing changed.
    Stale,
    /// Tasks whose deadline passed: `requeued` went back to todo, `failed` exceeded their limit.
    Expired { requeued: Vec<u64>, failed: Vec<u64> },
    /// The trainer's id, to put in every later request.
    TrainerRegistered { trainer: u64 },
    /// The trainer is gone; these of its pending tasks went back to todo.
    TrainerRemoved { requeued: Vec<u64> },
    /// The pserver holds `slot` under `generation`; `checkpoint` is the slot's latest,
    /// to restore from.
    SlotClaimed { slot: u32, generation: u64, checkpoint: Option<CheckpointMeta> },
    /// All `desired` slots are held.
    SlotsFull { desired: u32 },
    /// The slot is not held under the generation the request carries: nothing changed.
    SlotNotHeld,
    /// The client already moved past this sequence number; its answer is no longer kept.
    StaleRequest { last_seq: u64 },
    /// The command is invalid or conflicts with the state; `reason` says what to fix.
    Rejected { reason: String },
    /// A batch of a dataset report was stored; `received` of `total` chunks have arrived.
    DatasetLoading { received: u64, total: u64 },
    /// A leader decision computed in term `decided` was committed in term `committed`:
    /// leadership changed in between, so it was not applied.
    WrongTerm { decided: u64, committed: u64 },
    /// The client's sequence number `seq` already answered a request with another body: a
    /// retry must repeat its request exactly, and a new request needs a new number. Nothing
    /// changed.
    StampReused { seq: u64 },
    /// A client the state does not know (neither a registered trainer's nor a slot holder's)
    /// while every session of the strangers' pool is in use by a client that may still retry:
    /// nothing changed; the same request may succeed after `retry_after_ms`.
    TryAgainLater { retry_after_ms: u64 },
    /// The job was cancelled: its trainers and pservers stop (exit 0).
    JobCancelled,
    /// No job has this name (or id): it was never submitted, or it was removed.
    NoSuchJob { job: String },
    /// A progress checkpoint `id` was recorded at `pass` with `done` tasks done.
    ProgressCheckpointed { id: u64, pass: u32, done: u64 },
    /// The queue is back at `pass` with `todo` tasks to do again.
    ProgressRestored { pass: u32, todo: u64 },
    /// The job and everything it held are gone.
    JobRemoved,
    /// A restore of the model is under way: the queue goes back to `pass` once `pservers`
    /// holders have reloaded their shards; no task is handed out until then.
    RestoreWaiting { pass: u32, pservers: u32 },
    /// A task's holder is at work on it: its deadline is `timeout_ms` from now.
    TaskExtended { timeout_ms: u64 },
    /// The answer to a rendezvous operation.
    Rendezvous(RendezvousReply),
    /// A rendezvous operation would pass a bound (`reason` names it): nothing changed.
    RendezvousFull { reason: String },
    /// Whether the rendezvous run existed (and is now gone).
    RendezvousRemoved { existed: bool },
    /// A restart made job incarnation `job_id`: the job of its name had ended.
    JobRestarted { job_id: u64 },
    /// The answers to a `FinishedThenGetTask`: one per finished receipt, as `TaskFinished`
    /// answers it, and `then`, as `GetTask` answers the ask.
    FinishedThenTask { finished: Vec<Response>, then: Box<Response> },
}

impl Response {
    /// Whether a client's retry must get this answer again rather than a fresh one: true for
    /// every answer to a command that changed the state. Answers to commands that changed
    /// nothing (refusals, "nothing to hand out", fenced reports) are not kept, so they take no
    /// session and cannot push out the session of a client whose write did take effect.
    pub fn must_be_replayed(&self) -> bool {
        if let Response::FinishedThenTask { finished, then } = self {
            // A retry applied afresh would find its accepted finishes already applied (stale).
            return then.must_be_replayed() || finished.iter().any(Response::must_be_replayed);
        }
        !matches!(
            self,
            Response::Rejected { .. }
                | Response::UnknownTrainer
                | Response::NoDataset
                | Response::NoMoreAvailable
                | Response::PassBefore { .. }
                | Response::PassAfter { .. }
                | Response::JobFinished
                | Response::SlotsFull { .. }
                | Response::SlotNotHeld
                | Response::Stale
                | Response::StaleRequest { .. }
                | Response::WrongTerm { .. }
                | Response::StampReused { .. }
                | Response::TryAgainLater { .. }
                | Response::JobCancelled
                | Response::NoSuchJob { .. }
                | Response::RendezvousFull { .. }
        )
    }
}

/// A task handed to a trainer. What it covers is not part of the answer (a task may hold
/// 1,024 chunks with long paths, and clients' sessions keep answers): the accepted dataset
/// never changes, so the service derives its chunks or its index range from the task id with
/// [`super::JobState::task_data`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TaskAssignment {
    /// The task id, `0..task_count`.
    pub task_id: u64,
    /// This dispatch's epoch; reports with another epoch are stale.
    pub epoch: u64,
    /// The pass this dispatch belongs to.
    pub pass: u32,
    /// When the leader will take the task back if no report arrived (state clock).
    pub deadline_ms: u64,
}

/// The versioned wire form, borrowed for encoding (same bytes as the owned form).
#[derive(Serialize)]
enum WireResponseRef<'a> {
    /// Never written; see `request.rs`.
    #[allow(dead_code)]
    V1Retired,
    V2(&'a Response),
}

/// The versioned wire form.
#[derive(Deserialize)]
enum WireResponse {
    V1Retired,
    V2(Response),
}

/// Encodes a response for the writer waiting on the Raft client write.
pub fn encode_response(response: &Response) -> Vec<u8> {
    codec::encode(&WireResponseRef::V2(response))
}

/// Decodes a response. Never panics, whatever the bytes.
pub fn decode_response(bytes: &[u8]) -> Result<Response, DecodeError> {
    match codec::decode(bytes, REQUEST_BYTES_MAX, "response")? {
        WireResponse::V2(response) => Ok(response),
        WireResponse::V1Retired => Err(DecodeError::Retired { what: "response" }),
    }
}
