//! Random command sequences: invariants after every step, determinism and snapshot round trips.

use client::TaskData;
use master::state::{
    CheckpointMeta, ChunkRef, ClientStamp, Command, DatasetKindView, MasterState, QueuePolicy,
    Request, Response,
};
use proptest::prelude::*;

use crate::support::checked;

/// One random step; indices are reduced modulo what exists, so most steps hit real targets.
#[derive(Debug, Clone)]
enum Op {
    Report { chunk_count: u64, passes: u32, chunks_per_task: u32, max_failures: u32, retry: bool },
    IndexReport { size: u64, shard_size: u64, passes: u32 },
    Register { client: u64 },
    Get { client: u64, trainer: u64, pass_offset: u32 },
    Finish { client: u64, pick: usize, stale: bool },
    Fail { client: u64, pick: usize, stale: bool },
    Expire,
    Lost { trainer: u64 },
    Retry { client: u64 },
    Claim { client: u64, addr: u8, desired: u32 },
    Release { slot: u32, generation: u64 },
    Checkpoint { slot: u32, generation: u64, step: u64 },
    Advance { ms: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    let client = 1u64..4;
    prop_oneof![
        1 => (1u64..12, 1u32..4, 1u32..4, 0u32..3, any::<bool>()).prop_map(
            |(chunk_count, passes, chunks_per_task, max_failures, retry)| {
                Op::Report { chunk_count, passes, chunks_per_task, max_failures, retry }
            }
        ),
        1 => (1u64..40, 1u64..8, 1u32..4)
            .prop_map(|(size, shard_size, passes)| Op::IndexReport { size, shard_size, passes }),
        3 => client.clone().prop_map(|client| Op::Register { client }),
        8 => (client.clone(), 0u64..5, 0u32..3)
            .prop_map(|(client, trainer, pass_offset)| Op::Get { client, trainer, pass_offset }),
        6 => (client.clone(), any::<usize>(), any::<bool>())
            .prop_map(|(client, pick, stale)| Op::Finish { client, pick, stale }),
        3 => (client.clone(), any::<usize>(), any::<bool>())
            .prop_map(|(client, pick, stale)| Op::Fail { client, pick, stale }),
        2 => Just(Op::Expire),
        1 => (0u64..6).prop_map(|trainer| Op::Lost { trainer }),
        3 => client.clone().prop_map(|client| Op::Retry { client }),
        1 => (client, 0u8..4, 1u32..4)
            .prop_map(|(client, addr, desired)| Op::Claim { client, addr, desired }),
        1 => (0u32..4, 0u64..8).prop_map(|(slot, generation)| Op::Release { slot, generation }),
        1 => (0u32..4, 0u64..8, 0u64..10)
            .prop_map(|(slot, generation, step)| Op::Checkpoint { slot, generation, step }),
        3 => (0u64..3000).prop_map(|ms| Op::Advance { ms }),
    ]
}

/// Turns ops into requests the way a leader and its clients would, remembering what clients
/// were told so they can report on real (and stale) dispatches and retry their last request.
#[derive(Default)]
struct Driver {
    now_ms: u64,
    /// Next sequence number per client (index = client id).
    seqs: [u64; 4],
    /// Last stamped request and its response per client.
    last: [Option<(Request, Response)>; 4],
    /// Every (task, epoch) dispatched so far.
    assignments: Vec<(u64, u64)>,
}

impl Driver {
    fn stamped(&mut self, client: u64, command: Command) -> Request {
        let index = usize::try_from(client).expect("small");
        self.seqs[index] += 1;
        let client = Some(ClientStamp { client_id: client, seq: self.seqs[index] });
        Request { client, now_ms: self.now_ms, term: None, command }
    }

    fn leader(&self, command: Command) -> Request {
        Request { client: None, now_ms: self.now_ms, term: None, command }
    }

    /// The (task, epoch) a report names: a known dispatch, one epoch older when `stale`.
    fn report_target(&self, pick: usize, stale: bool) -> (u64, u64) {
        let Some((task_id, epoch)) = self.assignments.get(pick % self.assignments.len().max(1))
        else {
            return (0, 1);
        };
        (*task_id, if stale { epoch.saturating_sub(1) } else { *epoch })
    }

    /// The request for `op`, or `None` for steps that only move time.
    fn request(&mut self, op: &Op, state: &MasterState) -> Option<Request> {
        let request = match op.clone() {
            Op::Report { chunk_count, passes, chunks_per_task, max_failures, retry } => {
                let policy = QueuePolicy {
                    chunks_per_task,
                    task_timeout_min_ms: 1000,
                    timeout_factor: 2,
                    max_task_failures: max_failures,
                    retry_failed_next_pass: retry,
                };
                let chunks = (0..chunk_count)
                    .map(|offset| ChunkRef {
                        path: "f".into(),
                        offset,
                        compressed_size: 1,
                        record_count: 1,
                    })
                    .collect();
                let command = Command::ReportDataset { job: "job".into(), chunks, passes, policy };
                self.stamped(1, command)
            }
            Op::IndexReport { size, shard_size, passes } => {
                let policy = QueuePolicy {
                    chunks_per_task: 1,
                    task_timeout_min_ms: 1000,
                    timeout_factor: 2,
                    max_task_failures: 1,
                    retry_failed_next_pass: true,
                };
                let job = "job".into();
                self.leader(Command::ReportIndexDataset { job, size, shard_size, passes, policy })
            }
            Op::Register { client } => {
                self.stamped(client, Command::RegisterTrainer { name: "t".into() })
            }
            Op::Get { client, trainer, pass_offset } => {
                let pass = (state.status().pass + pass_offset).saturating_sub(1);
                self.stamped(client, Command::GetTask { trainer, pass })
            }
            Op::Finish { client, pick, stale } => {
                let (task_id, epoch) = self.report_target(pick, stale);
                self.stamped(client, Command::TaskFinished { task_id, epoch })
            }
            Op::Fail { client, pick, stale } => {
                let (task_id, epoch) = self.report_target(pick, stale);
                self.stamped(client, Command::TaskFailed { task_id, epoch, reason: "bad".into() })
            }
            Op::Expire => self.leader(Command::ExpireTasks),
            Op::Lost { trainer } => self.leader(Command::TrainerLost { trainer }),
            Op::Retry { client } => {
                let index = usize::try_from(client).expect("small");
                let (request, _) = self.last[index].clone()?;
                Request { now_ms: self.now_ms, ..request }
            }
            Op::Claim { client, addr, desired } => self.stamped(
                client,
                Command::ClaimPServerSlot { addr: format!("ps{addr}:1"), desired },
            ),
            Op::Release { slot, generation } => {
                self.leader(Command::ReleasePServerSlot { slot, generation })
            }
            Op::Checkpoint { slot, generation, step } => {
                let path = storage::checkpoint::file_name(slot, step, generation);
                let meta = CheckpointMeta { path, step, crc32: 0, created_ms: 0 };
                self.leader(Command::RecordCheckpoint { slot, generation, meta })
            }
            Op::Advance { ms } => {
                self.now_ms += ms;
                return None;
            }
        };
        Some(request)
    }

    /// Learns from a response; asserts that a retry was answered with the original response.
    fn observe(&mut self, op: &Op, request: &Request, response: &Response) {
        if let Response::Task(assignment) = response {
            self.assignments.push((assignment.task_id, assignment.epoch));
        }
        let Some(stamp) = request.client else { return };
        let index = usize::try_from(stamp.client_id).expect("small");
        if let Op::Retry { .. } = op {
            let (_, original) = self.last[index].as_ref().expect("a retry repeats a request");
            // An answer that changed nothing is not kept: the retry is applied afresh.
            if original.must_be_replayed() {
                assert_eq!(
                    replayed(response),
                    replayed(original),
                    "a retry must get the original response"
                );
            }
            return;
        }
        self.last[index] = Some((request.clone(), response.clone()));
    }
}

/// Checks what `task` covers against its id, independently of the master's arithmetic: a
/// RecordIO task's chunks are consecutive from chunk `task * chunks_per_task` (the test's
/// chunks have offsets equal to their positions; task 0 is a whole group), an index task's
/// range is `[task * shard_size, min(size, (task + 1) * shard_size))`.
fn check_covered(state: &MasterState, task_id: u64) -> Result<(), String> {
    let data =
        |task_id| state.sole().task_data(task_id).ok_or("no dataset, yet a task was handed out");
    match data(task_id)? {
        TaskData::Chunks(chunks) => {
            let TaskData::Chunks(group) = data(0)? else { return Err("task 0 differs".into()) };
            let first = task_id * group.len() as u64;
            let offsets: Vec<u64> = chunks.iter().map(|chunk| chunk.offset).collect();
            let expected: Vec<u64> = (first..first + offsets.len() as u64).collect();
            let whole = !chunks.is_empty() && chunks.len() <= group.len();
            (whole && offsets == expected)
                .then_some(())
                .ok_or(format!("task {task_id} covers chunks {offsets:?}"))
        }
        TaskData::IndexRange { start, end } => {
            let Some(DatasetKindView::IndexRange { size, shard_size }) = state.status().dataset
            else {
                return Err(format!("task {task_id} covers {start}..{end} of a RecordIO job"));
            };
            let expected = task_id * shard_size..((task_id + 1) * shard_size).min(size);
            ((start..end) == expected)
                .then_some(())
                .ok_or(format!("task {task_id} covers {start}..{end}, not {expected:?}"))
        }
    }
}

/// What a replay must repeat: a claim's slot and generation (its checkpoint is the slot's
/// latest at the replay, by design), every other answer whole.
fn replayed(response: &Response) -> Response {
    match response {
        Response::SlotClaimed { slot, generation, .. } => {
            Response::SlotClaimed { slot: *slot, generation: *generation, checkpoint: None }
        }
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any sequence of commands keeps every invariant, two replicas stay byte-identical, retries
    /// are answered exactly once, a snapshot decodes to an equal state, and every task handed
    /// out covers what its id names.
    #[test]
    fn random_sequences_keep_invariants(
        started in any::<bool>(),
        index_job in any::<bool>(),
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        // Half the runs start with trainers and a dataset of either kind, so most of their
        // steps move tasks; the other half also explore what happens before either exists.
        let dataset = if index_job {
            Op::IndexReport { size: 11, shard_size: 2, passes: 2 }
        } else {
            Op::Report { chunk_count: 6, passes: 2, chunks_per_task: 1, max_failures: 1, retry: true }
        };
        let start = [Op::Register { client: 1 }, Op::Register { client: 2 }, dataset];
        let ops: Vec<Op> = start.into_iter().filter(|_| started).chain(ops).collect();
        let mut driver = Driver::default();
        let mut replica = MasterState::new();
        let mut other = MasterState::new();
        for (index, op) in ops.iter().enumerate() {
            let Some(request) = driver.request(op, &replica) else { continue };
            let before = replica.clone();
            let response = replica.apply(&request);
            checked("random sequence", index, &before, &replica);
            prop_assert_eq!(&other.apply(&request), &response);
            if let Response::Task(assignment) = &response {
                prop_assert_eq!(check_covered(&replica, assignment.task_id), Ok(()));
            }
            driver.observe(op, &request, &response);
        }
        let bytes = replica.encode();
        prop_assert_eq!(&bytes, &other.encode());
        let restored = MasterState::decode(&bytes).expect("a snapshot of a valid state decodes");
        prop_assert_eq!(&restored, &replica);
        prop_assert_eq!(restored.encode(), bytes);
    }
}
