//! The snapshot's layouts: the current one behind a marker, the marked layouts 3 (RecordIO
//! datasets only, `snapshot_legacy_dataset.rs`) and 2 (also sessions in one pool, pserver
//! slots without claim secrets) and the unmarked one of older builds (also sessions without
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
use super::dataset_loading::DatasetLoading;
use super::eval::EvalRecord;
use super::failers::Failers;
use super::master_state::MasterState;
use super::members;
use super::pserver_slots::PServerSlots;
use super::response::Response;
use super::sessions::{Session, Sessions, STRANGER_SESSION_COUNT_MAX};
use super::snapshot_legacy_dataset::{ChunksOnlyDataset, ChunksOnlyJob, ChunksOnlyState};
use super::snapshot_legacy_levelless::LevellessState;
use super::snapshot_legacy_progress::DataProgressState;
use super::snapshot_legacy_single_job::SingleJobState;
use super::snapshot_legacy_slots::SlotsWithoutSecrets;
use super::snapshot_legacy_tags::UnheldTagsState;
use super::snapshot_legacy_unshuffled::{UnshuffledJob, UnshuffledState, UnshuffledStateRef};
use super::task::{PendingTask, Task};
use super::task_queue::TaskQueue;
use super::trainer_registry::TrainerRegistry;

/// The first byte of a marked snapshot: no unmarked snapshot can begin with it.
const SNAPSHOT_MARKER: u8 = 0xFF;
/// The layout this build writes: 2 added request digests to sessions and each task's failing
/// trainers to the queue (1 is the unmarked one); 3 splits sessions into members and strangers
/// and keeps the secret of each pserver slot's claim; 4 gives the dataset a kind (RecordIO
/// chunks or an index range); 5 holds named jobs, each with its end and progress checkpoints;
/// 6 adds each job's pserver checkpoints taken for its progress checkpoints; 7 records each
/// slot's holder when a progress checkpoint was taken; 8 gives each job its shuffle seed and
/// adds the rendezvous key space; 9 adds the group's feature level.
const SNAPSHOT_LAYOUT_VERSION: u8 = 9;
/// The layout without the feature level (a state of level 1), still read
/// (`snapshot_legacy_levelless.rs`).
const SNAPSHOT_LAYOUT_VERSION_LEVELLESS: u8 = 8;
/// The layout of jobs without a shuffle seed and without the rendezvous key space, still read
/// (`snapshot_legacy_unshuffled.rs`), and still written by a group at feature level 1 whose
/// state it holds whole, so that builds before levels in the group can install the snapshot.
const SNAPSHOT_LAYOUT_VERSION_UNSHUFFLED: u8 = 7;
/// The layout of tags that name no holder, still read (`snapshot_legacy_tags.rs`).
const SNAPSHOT_LAYOUT_VERSION_UNHELD_TAGS: u8 = 6;
/// The layout of named jobs without pserver checkpoints for their progress, still read
/// (`snapshot_legacy_progress.rs`).
const SNAPSHOT_LAYOUT_VERSION_DATA_PROGRESS: u8 = 5;
/// The layout with one unnamed job, still read (`snapshot_legacy_single_job.rs`).
const SNAPSHOT_LAYOUT_VERSION_SINGLE_JOB: u8 = 4;
/// The layout with RecordIO datasets only, still read.
const SNAPSHOT_LAYOUT_VERSION_CHUNKS_ONLY: u8 = 3;
/// The layout with sessions in one pool and slots without secrets, still read.
const SNAPSHOT_LAYOUT_VERSION_ONE_POOL: u8 = 2;

impl MasterState {
    /// The snapshot: the state in the shared bincode configuration, behind a layout marker.
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// Reads a snapshot back, refusing one that decodes to an inconsistent state.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let state = decode(bytes)?;
        state.check_invariants()?;
        state.check_session_index()?;
        Ok(state)
    }
}

/// Encodes the state as a marked snapshot: of layout 7 while the group's feature level is the
/// base one and layout 7 holds the whole state (what builds before levels read), else of the
/// current layout.
fn encode(state: &MasterState) -> Vec<u8> {
    if let Some(unshuffled) = UnshuffledStateRef::of(state) {
        let mut bytes = vec![SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_UNSHUFFLED];
        bytes.extend_from_slice(&codec::encode(&unshuffled));
        return bytes;
    }
    let mut bytes = vec![SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION];
    bytes.extend_from_slice(&codec::encode(state));
    bytes
}

/// Decodes any layout still read; the caller checks the invariants.
pub(crate) fn decode(bytes: &[u8]) -> Result<MasterState, DecodeError> {
    let single: SingleJobState = match bytes {
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION, body @ ..] => {
            return codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot");
        }
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_LEVELLESS, body @ ..] => {
            let levelless: LevellessState = codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")?;
            return Ok(levelless.into());
        }
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_UNSHUFFLED, body @ ..] => {
            let unshuffled: UnshuffledState = codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")?;
            return Ok(unshuffled.into());
        }
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_UNHELD_TAGS, body @ ..] => {
            let unheld: UnheldTagsState = codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")?;
            return Ok(unheld.into());
        }
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_DATA_PROGRESS, body @ ..] => {
            let named: DataProgressState = codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")?;
            return Ok(named.into());
        }
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_SINGLE_JOB, body @ ..] => {
            codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")?
        }
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_CHUNKS_ONLY, body @ ..] => {
            let chunks_only: ChunksOnlyState = codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")?;
            chunks_only.into()
        }
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_ONE_POOL, body @ ..] => {
            let one_pool: OnePoolState = codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")?;
            one_pool.into()
        }
        [SNAPSHOT_MARKER, ..] => return Err(DecodeError::Retired { what: "snapshot" }),
        unmarked => {
            let legacy: LegacyState = codec::decode(unmarked, SNAPSHOT_BYTES_MAX, "snapshot")?;
            legacy.into()
        }
    };
    Ok(single.into())
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

#[derive(Serialize, Deserialize)]
struct LegacyJob {
    dataset: ChunksOnlyDataset,
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

impl From<LegacyJob> for UnshuffledJob {
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
        UnshuffledJob { dataset: legacy.dataset.into(), queue }
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

impl From<LegacyState> for SingleJobState {
    fn from(legacy: LegacyState) -> Self {
        let sessions = legacy.sessions.sessions.into_iter().map(|(client_id, session)| {
            let LegacySession { seq, method: _, response, last_seen_ms } = session;
            (client_id, Session { seq, digest: None, response, last_seen_ms, member: None })
        });
        let pservers = PServerSlots::from(legacy.pservers);
        let sessions = into_pools(sessions, &legacy.trainers, &pservers);
        SingleJobState {
            clock_ms: legacy.clock_ms,
            job: legacy.job.map(UnshuffledJob::from),
            trainers: legacy.trainers,
            pservers,
            eval: legacy.eval,
            sessions,
            loading: legacy.loading,
        }
    }
}

/// The state as layout 2 wrote it (field for field): sessions in one pool, slots without
/// secrets.
#[derive(Serialize, Deserialize)]
struct OnePoolState {
    clock_ms: u64,
    job: Option<ChunksOnlyJob>,
    trainers: TrainerRegistry,
    pservers: SlotsWithoutSecrets,
    eval: Option<EvalRecord>,
    sessions: OnePoolSessions,
    loading: Option<DatasetLoading>,
}

#[derive(Serialize, Deserialize)]
struct OnePoolSessions {
    sessions: BTreeMap<u64, OnePoolSession>,
    by_age: BTreeSet<(u64, u64)>,
}

#[derive(Serialize, Deserialize)]
struct OnePoolSession {
    seq: u64,
    digest: Option<u64>,
    response: Response,
    last_seen_ms: u64,
}

impl From<OnePoolState> for SingleJobState {
    fn from(one_pool: OnePoolState) -> Self {
        let sessions = one_pool.sessions.sessions.into_iter().map(|(client_id, session)| {
            let OnePoolSession { seq, digest, response, last_seen_ms } = session;
            (client_id, Session { seq, digest, response, last_seen_ms, member: None })
        });
        let pservers = PServerSlots::from(one_pool.pservers);
        let sessions = into_pools(sessions, &one_pool.trainers, &pservers);
        SingleJobState {
            clock_ms: one_pool.clock_ms,
            job: one_pool.job.map(UnshuffledJob::from),
            trainers: one_pool.trainers,
            pservers,
            eval: one_pool.eval,
            sessions,
            loading: one_pool.loading,
        }
    }
}

/// Splits sessions of one pool: a session whose kept answer made a member still alive (a
/// registration, a claim) is bound to it; the others are strangers, of which the most recently
/// used `STRANGER_SESSION_COUNT_MAX` are kept (the others' retries are applied again, as after
/// an eviction; a live member without a binding is bound on its next request).
fn into_pools(
    sessions: impl Iterator<Item = (u64, Session)>,
    trainers: &TrainerRegistry,
    slots: &PServerSlots,
) -> Sessions {
    let mut pools = Sessions::default();
    let mut strangers = Vec::new();
    for (client_id, mut session) in sessions {
        let member = members::created(&session.response)
            .filter(|member| members::is_alive(*member, trainers, slots))
            .filter(|member| !pools.is_bound(*member));
        match member {
            Some(member) => {
                session.member = Some(member);
                pools.by_member.insert(member, client_id);
                pools.sessions.insert(client_id, session);
            }
            None => strangers.push((client_id, session)),
        }
    }
    strangers
        .sort_by_key(|(client_id, session)| std::cmp::Reverse((session.last_seen_ms, *client_id)));
    for (client_id, session) in strangers.into_iter().take(STRANGER_SESSION_COUNT_MAX) {
        pools.strangers_by_age.insert((session.last_seen_ms, client_id));
        pools.sessions.insert(client_id, session);
    }
    pools
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::pserver_slots::SlotHolder;
    use crate::state::request::ClientStamp;
    use crate::state::sessions::Member;

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
            pservers: SlotsWithoutSecrets::none(),
            eval: None,
            sessions: LegacySessions {
                sessions: legacy_sessions,
                by_age: BTreeSet::from([(10, 77)]),
            },
            loading: None,
        };
        let bytes = codec::encode(&legacy);
        assert_ne!(bytes[0], SNAPSHOT_MARKER);
        let decoded = MasterState::decode(&bytes).expect("the old layout decodes");
        let mut state = decoded.sole().clone();
        let replay = state.sessions.lookup(ClientStamp { client_id: 77, seq: 4 }, 123, false, 11);
        assert!(matches!(replay, super::super::sessions::Lookup::Replay(_)), "{replay:?}");
        // A group at the base feature level writes layout 7, which builds before levels read.
        let marked = decoded.encode();
        assert_eq!(&marked[..2], &[SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_UNSHUFFLED]);
        assert_eq!(MasterState::decode(&marked).expect("layout 7 decodes"), decoded);
    }

    /// A job of the unmarked layout (a queue without failing trainers) decodes as it was, with
    /// no failures counted.
    #[test]
    fn an_unmarked_job_of_an_older_build_still_decodes() {
        use crate::state::chunk_list::ChunkList;
        use crate::state::dataset::{Dataset, QueuePolicy};
        use crate::state::job::Job;
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
        let dataset = Dataset::recordio("job", chunks.clone(), 2, policy).expect("a valid dataset");
        let job = Job::new(dataset, None);
        let digest = chunks.digest();
        let dataset = ChunksOnlyDataset { job: "job".into(), chunks, passes: 2, policy, digest };
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
            job: Some(LegacyJob { dataset, queue: legacy_queue }),
            trainers: TrainerRegistry::default(),
            pservers: SlotsWithoutSecrets::none(),
            eval: None,
            sessions: LegacySessions { sessions: BTreeMap::new(), by_age: BTreeSet::new() },
            loading: None,
        };
        let state = MasterState::decode(&codec::encode(&legacy)).expect("the old layout decodes");
        assert_eq!(state.sole().job, Some(job), "the job comes back as it was, with no failers");
        assert_eq!(state.sole().name(), "job", "named by its dataset report");
    }

    /// A snapshot of layout 2 (sessions in one pool, slots without secrets) decodes: the
    /// session that registered a trainer still registered is bound to it, the others are
    /// strangers, the slot's holder is kept but no secret confirms it, and the state re-encodes
    /// in the current layout.
    #[test]
    fn a_one_pool_snapshot_of_layout_2_still_decodes() {
        let mut trainers = TrainerRegistry::default();
        let trainer = trainers.register("t").expect("room for a trainer");
        let session = |response, last_seen_ms| OnePoolSession {
            seq: 1,
            digest: Some(5),
            response,
            last_seen_ms,
        };
        let sessions = BTreeMap::from([
            (7, session(Response::TrainerRegistered { trainer }, 10)),
            (8, session(Response::Accepted, 11)),
        ]);
        let mut pservers = SlotsWithoutSecrets::none();
        pservers.desired = Some(2);
        pservers.holders.insert(1, SlotHolder { addr: "a:1".into(), generation: 3 });
        pservers.next_generation = 4;
        let one_pool = OnePoolState {
            clock_ms: 11,
            job: None,
            trainers,
            pservers,
            eval: None,
            sessions: OnePoolSessions { sessions, by_age: BTreeSet::from([(10, 7), (11, 8)]) },
            loading: None,
        };
        let mut bytes = vec![SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_ONE_POOL];
        bytes.extend_from_slice(&codec::encode(&one_pool));
        let decoded = MasterState::decode(&bytes).expect("layout 2 decodes");
        let state = decoded.sole();
        assert_eq!(state.sessions.member_of(7), Some(Member::Trainer(trainer)));
        assert_eq!(state.sessions.member_of(8), None);
        assert_eq!(state.sessions.strangers_by_age, BTreeSet::from([(11, 8)]));
        assert!(state.pservers.holds(1, 3), "the holder is kept");
        let guess = crate::state::SlotSecret::from_bits(0);
        assert!(!state.slot_held(1, 3, guess), "no secret confirms a holder without one");
        assert_eq!(state.name(), "", "unnamed: no dataset was reported yet");
        // A group at the base feature level writes layout 7, which builds before levels read.
        let marked = decoded.encode();
        assert_eq!(&marked[..2], &[SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION_UNSHUFFLED]);
        assert_eq!(MasterState::decode(&marked).expect("layout 7 decodes"), decoded);
    }

    /// A marked snapshot of a layout this build does not know is refused, not misread.
    #[test]
    fn an_unknown_marked_layout_is_refused() {
        let mut bytes = MasterState::new().encode();
        bytes[1] = SNAPSHOT_LAYOUT_VERSION + 1;
        assert!(matches!(decode(&bytes), Err(DecodeError::Retired { .. })));
    }
}
