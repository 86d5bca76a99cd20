//! The snapshot's layouts: the current one behind a marker, the marked layout 2 (pserver slots
//! without their claims' secrets), and the unmarked one of older builds (sessions without
//! request digests, task queues without the trainers that failed each task), read and
//! converted so an upgrade keeps its snapshots.
//!
//! bincode is not self-describing, so a layout change needs a way to tell layouts apart. The
//! old layout begins with the state's clock as a varint, whose first byte is never 0xFF
//! (bincode's varints use 0..=253 for a `u64`); the current layout begins with
//! [`SNAPSHOT_MARKER`] and a version byte.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::codec::{self, DecodeError, SNAPSHOT_BYTES_MAX};
use super::dataset::Dataset;
use super::dataset_loading::DatasetLoading;
use super::eval::EvalRecord;
use super::failers::Failers;
use super::job::Job;
use super::master_state::MasterState;
use super::pserver_slots::{CheckpointMeta, PServerSlots, SlotHolder};
use super::response::Response;
use super::sessions::{Session, Sessions};
use super::task::{PendingTask, Task};
use super::task_queue::TaskQueue;
use super::trainer_registry::TrainerRegistry;

/// The first byte of a marked snapshot: no unmarked snapshot can begin with it.
const SNAPSHOT_MARKER: u8 = 0xFF;
/// The layout this build writes: 2 added request digests to sessions and each task's failing
/// trainers to the queue (1 is the unmarked one); 3 adds the secrets of pserver slot claims.
const SNAPSHOT_LAYOUT_VERSION: u8 = 3;
/// The marked layout before slot secrets.
const SNAPSHOT_LAYOUT_VERSION_NO_SECRETS: u8 = 2;

/// Encodes the state as a marked snapshot of the current layout.
pub(crate) fn encode(state: &MasterState) -> Vec<u8> {
    let mut bytes = vec![SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION];
    bytes.extend_from_slice(&codec::encode(state));
    bytes
}

/// Decodes either layout; the caller checks the invariants.
pub(crate) fn decode(bytes: &[u8]) -> Result<MasterState, DecodeError> {
    match bytes {
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION, body @ ..] => {
            codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")
        }
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_NO_SECRETS, body @ ..] => {
            let state: StateWithoutSecrets = codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")?;
            Ok(state.into())
        }
        [SNAPSHOT_MARKER, ..] => Err(DecodeError::Retired { what: "snapshot" }),
        unmarked => {
            let legacy: LegacyState = codec::decode(unmarked, SNAPSHOT_BYTES_MAX, "snapshot")?;
            Ok(legacy.into())
        }
    }
}

/// The state as builds before request digests wrote it (field for field).
#[derive(Serialize, Deserialize)]
struct LegacyState {
    clock_ms: u64,
    job: Option<LegacyJob>,
    trainers: TrainerRegistry,
    pservers: SlotsWithoutSecrets,
    eval: Option<EvalRecord>,
    sessions: LegacySessions,
    loading: Option<DatasetLoading>,
}

/// The state as layout 2 wrote it (field for field): pserver slots without secrets.
#[derive(Serialize, Deserialize)]
struct StateWithoutSecrets {
    clock_ms: u64,
    job: Option<Job>,
    trainers: TrainerRegistry,
    pservers: SlotsWithoutSecrets,
    eval: Option<EvalRecord>,
    sessions: Sessions,
    loading: Option<DatasetLoading>,
}

/// Pserver slots before claims carried secrets (field for field). Their holders keep no
/// secret, so none of them is confirmed again: each exits, its lease runs out, and a pserver
/// of this build claims the slot (restoring the kept checkpoint).
#[derive(Serialize, Deserialize)]
struct SlotsWithoutSecrets {
    desired: Option<u32>,
    holders: BTreeMap<u32, SlotHolder>,
    checkpoints: BTreeMap<u32, CheckpointMeta>,
    next_generation: u64,
    version: u64,
}

impl From<SlotsWithoutSecrets> for PServerSlots {
    fn from(old: SlotsWithoutSecrets) -> Self {
        let SlotsWithoutSecrets { desired, holders, checkpoints, next_generation, version } = old;
        let secrets = BTreeMap::new();
        PServerSlots { desired, holders, checkpoints, next_generation, version, secrets }
    }
}

impl From<StateWithoutSecrets> for MasterState {
    fn from(old: StateWithoutSecrets) -> Self {
        MasterState {
            clock_ms: old.clock_ms,
            job: old.job,
            trainers: old.trainers,
            pservers: old.pservers.into(),
            eval: old.eval,
            sessions: old.sessions,
            loading: old.loading,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct LegacyJob {
    dataset: Dataset,
    queue: LegacyTaskQueue,
}

/// A task queue without `failers` (field for field): nobody has failed a task yet as far as
/// the converted state knows, so each trainer's next failure of a task is its first.
#[derive(Serialize, Deserialize)]
struct LegacyTaskQueue {
    tasks: Vec<Task>,
    todo: VecDeque<u64>,
    pending: BTreeMap<u64, PendingTask>,
    done: BTreeSet<u64>,
    failed: BTreeSet<u64>,
    pass: u32,
    job_finished: bool,
    completion_ms_average: Option<u64>,
    held: BTreeMap<u64, u64>,
    reason_bytes: u64,
}

impl From<LegacyJob> for Job {
    fn from(legacy: LegacyJob) -> Self {
        let LegacyTaskQueue {
            tasks,
            todo,
            pending,
            done,
            failed,
            pass,
            job_finished,
            completion_ms_average,
            held,
            reason_bytes,
        } = legacy.queue;
        let queue = TaskQueue {
            tasks,
            todo,
            pending,
            done,
            failed,
            pass,
            job_finished,
            completion_ms_average,
            held,
            reason_bytes,
            failers: Failers::default(),
        };
        Job { dataset: legacy.dataset, queue }
    }
}

#[derive(Serialize, Deserialize)]
struct LegacySessions {
    sessions: BTreeMap<u64, LegacySession>,
    by_age: BTreeSet<(u64, u64)>,
}

/// A session that kept the method code of its request instead of a digest of it.
#[derive(Serialize, Deserialize)]
struct LegacySession {
    seq: u64,
    method: u8,
    response: Response,
    last_seen_ms: u64,
}

impl From<LegacyState> for MasterState {
    fn from(legacy: LegacyState) -> Self {
        let sessions = legacy
            .sessions
            .sessions
            .into_iter()
            .map(|(client_id, session)| {
                let LegacySession { seq, method: _, response, last_seen_ms } = session;
                (client_id, Session { seq, digest: None, response, last_seen_ms })
            })
            .collect();
        MasterState {
            clock_ms: legacy.clock_ms,
            job: legacy.job.map(Job::from),
            trainers: legacy.trainers,
            pservers: legacy.pservers.into(),
            eval: legacy.eval,
            sessions: Sessions { sessions, by_age: legacy.sessions.by_age },
            loading: legacy.loading,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::request::ClientStamp;

    /// A snapshot of the unmarked layout (sessions with method codes) decodes, its sessions
    /// replay retries as before, and the state re-encodes in the marked layout.
    #[test]
    fn an_unmarked_snapshot_of_an_older_build_still_decodes() {
        let mut legacy_sessions = BTreeMap::new();
        let session = LegacySession {
            seq: 4,
            method: 6,
            response: Response::TrainerRegistered { trainer: 1 },
            last_seen_ms: 10,
        };
        legacy_sessions.insert(77, session);
        let legacy = LegacyState {
            clock_ms: 10,
            job: None,
            trainers: TrainerRegistry::default(),
            pservers: no_slots(),
            eval: None,
            sessions: LegacySessions {
                sessions: legacy_sessions,
                by_age: BTreeSet::from([(10, 77)]),
            },
            loading: None,
        };
        let bytes = codec::encode(&legacy);
        assert_ne!(bytes[0], SNAPSHOT_MARKER);
        let mut state = MasterState::decode(&bytes).expect("the old layout decodes");
        let replay = state.sessions.lookup(ClientStamp { client_id: 77, seq: 4 }, 123, 11);
        assert!(matches!(replay, super::super::sessions::Lookup::Replay(_)), "{replay:?}");
        let marked = state.encode();
        assert_eq!(&marked[..2], &[SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION]);
        assert_eq!(MasterState::decode(&marked).expect("the new layout decodes"), state);
    }

    /// A job of the unmarked layout (a queue without failing trainers) decodes as it was, with
    /// no failures counted.
    #[test]
    fn an_unmarked_job_of_an_older_build_still_decodes() {
        use crate::state::chunk_list::ChunkList;
        use crate::state::dataset::QueuePolicy;
        use crate::state::ChunkRef;
        let chunk =
            |offset| ChunkRef { path: "a".into(), offset, compressed_size: 8, record_count: 1 };
        let policy = QueuePolicy {
            chunks_per_task: 1,
            task_timeout_min_ms: 1000,
            timeout_factor: 3,
            max_task_failures: 2,
            retry_failed_next_pass: false,
        };
        let chunks = ChunkList::from_refs(&[chunk(0), chunk(100)]);
        let job = Job::new(Dataset::new("job", chunks, 2, policy).expect("a valid dataset"));
        let queue = job.queue.clone();
        let legacy_queue = LegacyTaskQueue {
            tasks: queue.tasks,
            todo: queue.todo,
            pending: queue.pending,
            done: queue.done,
            failed: queue.failed,
            pass: queue.pass,
            job_finished: queue.job_finished,
            completion_ms_average: queue.completion_ms_average,
            held: queue.held,
            reason_bytes: queue.reason_bytes,
        };
        let legacy = LegacyState {
            clock_ms: 10,
            job: Some(LegacyJob { dataset: job.dataset.clone(), queue: legacy_queue }),
            trainers: TrainerRegistry::default(),
            pservers: no_slots(),
            eval: None,
            sessions: LegacySessions { sessions: BTreeMap::new(), by_age: BTreeSet::new() },
            loading: None,
        };
        let state = MasterState::decode(&codec::encode(&legacy)).expect("the old layout decodes");
        assert_eq!(state.job, Some(job), "the job comes back as it was, with no failers");
    }

    fn no_slots() -> SlotsWithoutSecrets {
        SlotsWithoutSecrets {
            desired: None,
            holders: BTreeMap::new(),
            checkpoints: BTreeMap::new(),
            next_generation: 1,
            version: 0,
        }
    }

    /// A snapshot of layout 2 (slots without secrets) decodes with its holders and
    /// checkpoints, and none of its holders is confirmed by any secret.
    #[test]
    fn a_layout_2_snapshot_without_slot_secrets_still_decodes() {
        let mut slots = no_slots();
        slots.desired = Some(2);
        slots.holders.insert(1, SlotHolder { addr: "a:1".into(), generation: 3 });
        slots.next_generation = 4;
        let old = StateWithoutSecrets {
            clock_ms: 10,
            job: None,
            trainers: TrainerRegistry::default(),
            pservers: slots,
            eval: None,
            sessions: Sessions::default(),
            loading: None,
        };
        let mut bytes = vec![SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_NO_SECRETS];
        bytes.extend_from_slice(&codec::encode(&old));
        let state = MasterState::decode(&bytes).expect("layout 2 decodes");
        assert!(state.pservers.holds(1, 3), "the holder is kept");
        let guess = crate::state::SlotSecret::from_bits(0);
        assert!(!state.slot_held(1, 3, guess), "no secret confirms a holder without one");
        let marked = state.encode();
        assert_eq!(&marked[..2], &[SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION]);
        assert_eq!(MasterState::decode(&marked).expect("the new layout decodes"), state);
    }

    /// A marked snapshot of a layout this build does not know is refused, not misread.
    #[test]
    fn an_unknown_marked_layout_is_refused() {
        let mut bytes = MasterState::new().encode();
        bytes[1] = SNAPSHOT_LAYOUT_VERSION + 1;
        assert!(matches!(decode(&bytes), Err(DecodeError::Retired { .. })));
    }
}
