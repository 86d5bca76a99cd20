//! Groups concurrent writes into one log entry. openraft 0.9 flushes the leader's log once per
//! client write, so without this every write would pay a full fsync on the leader; with it,
//! writes that arrive while earlier entries are in flight share the next entry and its fsync.
//!
//! Every proposed entry is answered, and its in-flight slot freed, within the write timeout.
//! openraft 0.9 answers a pending `client_write` only when the entry is applied or truncated;
//! an entry that a snapshot install replaced (the node lost leadership while partitioned, and
//! the new leader's snapshot reached past this node's log, so nothing was truncated) is never
//! answered. Waiting for that answer held both slots for ever, and the node, leading again
//! later, timed out every write. So the wait also ends when the node stops leading in the term
//! it proposed in (the writers are told `ForwardToLeader`; they retry with the same stamp, and
//! the entry may or may not have committed), and at the write timeout.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::error::{ClientWriteError, Fatal, ForwardToLeader, RaftError};
use openraft::raft::ClientWriteResult;
use openraft::BasicNode;
use tokio::sync::{mpsc, oneshot, Semaphore};
use tokio::time::Instant;

use crate::batch_pace::{writer_share, BatchPace};
use crate::cluster_info::ClusterInfo;
use crate::handoff::Successor;
use crate::leadership_ends::LeadershipEnds;
use crate::{Commands, Raft, TypeConfig, WriteError};

/// Writes waiting for a batch; a full queue makes writers wait.
const QUEUE_LENGTH_MAX: usize = 16 * 1024;
/// Commands in one entry at most.
const BATCH_LENGTH_MAX: usize = 1024;
/// Entries proposed but not yet answered at most: group commit. openraft 0.9's core awaits the
/// leader's own log flush before it replicates, so a second entry in flight lets one entry's
/// flush overlap the other's replication. More in flight only splits writers into smaller
/// entries. Measured with `raftrain bench consensus` (with [`BatchPace`]): 64 stream clients
/// 16,000-17,700 writes/s with 1, 18,700-20,300 with 2, 18,800-20,600 with 3.
const BATCHES_IN_FLIGHT_MAX: usize = 2;
/// bincode's length prefix of each command in an entry.
const COMMAND_OVERHEAD_BYTES: usize = 8;
/// Writes a writer may say were sent together (`ConsensusNode::write_together`) at most: a
/// larger count is taken as this.
pub const TOGETHER_MAX: usize = 8;
/// How long an entry waits, at most, for the rest of the writes sent together with one it
/// holds: they left the client within microseconds of each other.
const TOGETHER_LINGER: Duration = Duration::from_millis(1);

/// Where one write's response goes.
type Reply = oneshot::Sender<Result<Vec<u8>, WriteError>>;

/// One write waiting for its batch, and how many writes were sent together with it (itself
/// included; at most [`TOGETHER_MAX`]).
struct Pending {
    command: Vec<u8>,
    reply: Reply,
    together: usize,
}

/// The sending side of the batching task; the task ends when every sender is dropped.
pub(crate) struct Batcher {
    requests: mpsc::Sender<Pending>,
    /// One permit per entry that may be in flight; all free means none is.
    in_flight: Arc<Semaphore>,
}

impl Batcher {
    /// Starts the batching task for `raft`; entries hold at most `batch_bytes_max` command bytes,
    /// and an entry's writers are answered at the latest `write_timeout_ms` after it is proposed.
    /// Once `leaving` is set (the node hands leadership off), nothing more is proposed: queued
    /// writes are told `ForwardToLeader` (the successor, once it leads), so the log stops
    /// growing and a follower can catch up.
    pub(crate) fn start(
        raft: Raft,
        batch_bytes_max: usize,
        write_timeout_ms: u64,
        (leaving, successor): (Arc<AtomicBool>, Arc<Successor>),
    ) -> Self {
        let (requests, receiver) = mpsc::channel(QUEUE_LENGTH_MAX);
        let limits = Limits { batch_bytes_max, write_timeout_ms };
        let in_flight = Arc::new(Semaphore::new(BATCHES_IN_FLIGHT_MAX));
        let leaving = (leaving, successor);
        tokio::spawn(run(raft, receiver, limits, leaving, Arc::clone(&in_flight)));
        Self { requests, in_flight }
    }

    /// Returns once no proposed entry awaits its answer. Once the node is leaving nothing more
    /// is proposed, so from then on the leader's log grows no further: a follower found caught
    /// up stays caught up (a handoff target with a shorter log would be refused the vote).
    pub(crate) async fn drained(&self) {
        let all = u32::try_from(BATCHES_IN_FLIGHT_MAX).expect("a small constant");
        let permits =
            self.in_flight.acquire_many(all).await.expect("the semaphore is never closed");
        drop(permits);
    }

    /// Replicates `command` in some batch and returns its response. `together`: how many
    /// writes (this one included) were sent at once, each on its own: the entry holding this
    /// one waits up to [`TOGETHER_LINGER`] for the others, so that they share its disk syncs.
    pub(crate) async fn write(
        &self,
        command: Vec<u8>,
        together: usize,
    ) -> Result<Vec<u8>, WriteError> {
        let (reply, response) = oneshot::channel();
        let stopped =
            || WriteError::Stopped { reason: "the write batcher has stopped".to_string() };
        let together = together.clamp(1, TOGETHER_MAX);
        self.requests.send(Pending { command, reply, together }).await.map_err(|_| stopped())?;
        response.await.map_err(|_| stopped())?
    }
}

/// The bounds of one batcher.
#[derive(Clone, Copy)]
struct Limits {
    batch_bytes_max: usize,
    write_timeout_ms: u64,
}

async fn run(
    raft: Raft,
    mut receiver: mpsc::Receiver<Pending>,
    limits: Limits,
    (leaving, successor): (Arc<AtomicBool>, Arc<Successor>),
    in_flight: Arc<Semaphore>,
) {
    let leadership = LeadershipEnds::start(raft.server_metrics());
    let pace = Arc::new(Mutex::new(BatchPace::default()));
    let mut carried: Option<Pending> = None;
    loop {
        let first = match carried.take() {
            Some(pending) => pending,
            None => match receiver.recv().await {
                Some(pending) => pending,
                None => return,
            },
        };
        // Gather only once a slot is free: while every slot is busy, writes pile up in the
        // queue and all go into the next entry.
        let permit =
            Arc::clone(&in_flight).acquire_owned().await.expect("the semaphore is never closed");
        let last_pace = *pace.lock().expect("the pace lock is never poisoned");
        let mut batch = Gathered::new(first, limits.batch_bytes_max);
        carried = batch.gather(&mut receiver, last_pace).await;
        // Entries reach openraft in the order they were gathered; only answers are awaited
        // concurrently.
        let started = Instant::now();
        let writers = batch.writers;
        let (commands, replies) = batch.split();
        if leaving.load(Ordering::SeqCst) {
            let (raft, successor) = (raft.clone(), Arc::clone(&successor));
            tokio::spawn(async move { deliver(Err(successor.redirect(&raft).await), replies) });
            continue;
        }
        // Read before proposing: if the node leads now, the entry can only be proposed in this
        // term or later, and a later term means this leadership ended anyway.
        let leading_term = leadership.leading();
        let answer = raft.client_write_ff(Commands(commands)).await;
        let (raft, leadership) = (raft.clone(), leadership.clone());
        let pace = Arc::clone(&pace);
        tokio::spawn(async move {
            let ended = leadership.ended(leading_term);
            let outcome = settle(&raft, answer, ended, limits.write_timeout_ms).await;
            deliver(outcome, replies);
            *pace.lock().expect("the pace lock is never poisoned") =
                BatchPace::new(writers, started.elapsed());
            drop(permit);
        });
    }
}

/// The writes of one entry being gathered, and their command bytes.
struct Gathered {
    writes: Vec<Pending>,
    bytes: usize,
    bytes_max: usize,
    /// The most writes one of those gathered said were sent together with it.
    together: usize,
    /// The writers of those gathered, in [`writer_share`]s.
    writers: usize,
}

impl Gathered {
    fn new(first: Pending, bytes_max: usize) -> Self {
        let bytes = first.command.len() + COMMAND_OVERHEAD_BYTES;
        let writers = writer_share(first.together);
        Self { together: first.together, writes: vec![first], bytes, bytes_max, writers }
    }

    /// Takes queued writes until the entry is full, and while `pace` wants more, or writes
    /// sent together with one gathered are missing, waits for them up to the linger of each
    /// ([`BatchPace::linger`], [`TOGETHER_LINGER`]). Returns a write that did not fit, for the
    /// next entry.
    async fn gather(
        &mut self,
        receiver: &mut mpsc::Receiver<Pending>,
        pace: BatchPace,
    ) -> Option<Pending> {
        let started = Instant::now();
        while self.writes.len() < BATCH_LENGTH_MAX {
            let pending = match receiver.try_recv() {
                Ok(pending) => pending,
                Err(_) if self.wants_more(pace) => {
                    let deadline = started + self.linger(pace);
                    match tokio::time::timeout_at(deadline, receiver.recv()).await {
                        Ok(Some(pending)) => pending,
                        Ok(None) | Err(_) => return None,
                    }
                }
                Err(_) => return None,
            };
            if let Err(pending) = self.push(pending) {
                return Some(pending);
            }
        }
        None
    }

    /// Whether to wait for more writes: `pace` wants more, or some sent together with one
    /// gathered are not in yet.
    fn wants_more(&self, pace: BatchPace) -> bool {
        pace.wants_more(self.writers) || self.writes.len() < self.together
    }

    /// The longest wait for more, counted from when the gathering began.
    fn linger(&self, pace: BatchPace) -> Duration {
        if self.writes.len() < self.together {
            return pace.linger().max(TOGETHER_LINGER);
        }
        pace.linger()
    }

    fn split(self) -> (Vec<Vec<u8>>, Vec<Reply>) {
        self.writes.into_iter().map(|pending| (pending.command, pending.reply)).unzip()
    }

    fn push(&mut self, pending: Pending) -> Result<(), Pending> {
        let size = pending.command.len() + COMMAND_OVERHEAD_BYTES;
        if self.bytes + size > self.bytes_max {
            return Err(pending);
        }
        self.bytes += size;
        self.together = self.together.max(pending.together);
        self.writers += writer_share(pending.together);
        self.writes.push(pending);
        Ok(())
    }
}

/// The answer to one proposed entry: openraft's, or `ForwardToLeader` once the node no longer
/// leads in the term it was proposed in (`leadership_ended`; openraft may never answer: see the
/// module comment), or a timeout.
async fn settle(
    raft: &Raft,
    submitted: Result<oneshot::Receiver<ClientWriteResult<TypeConfig>>, Fatal<u64>>,
    leadership_ended: impl std::future::Future<Output = ()>,
    write_timeout_ms: u64,
) -> Result<Vec<Vec<u8>>, WriteError> {
    let timeout = Duration::from_millis(write_timeout_ms);
    if crate::planted::active("jammed-batcher") {
        return match answer(submitted).await {
            Ok(written) => Ok(written.data.0),
            Err(error) => Err(write_error(raft, error)),
        };
    }
    tokio::select! {
        // An answer that is ready wins over a leadership change seen at the same moment.
        biased;
        answer = answer(submitted) => match answer {
            Ok(written) => Ok(written.data.0),
            Err(error) => Err(write_error(raft, error)),
        },
        () = leadership_ended => {
            let leader_id = raft.metrics().borrow().current_leader;
            Err(forward_to_leader(raft, ForwardToLeader { leader_id, leader_node: None }))
        }
        () = tokio::time::sleep(timeout) => Err(WriteError::Timeout { timeout_ms: write_timeout_ms }),
    }
}

/// openraft's answer to a proposed entry.
async fn answer(
    submitted: Result<oneshot::Receiver<ClientWriteResult<TypeConfig>>, Fatal<u64>>,
) -> Result<
    openraft::raft::ClientWriteResponse<TypeConfig>,
    RaftError<u64, ClientWriteError<u64, BasicNode>>,
> {
    match submitted {
        Ok(receiver) => match receiver.await {
            Ok(result) => result.map_err(RaftError::APIError),
            Err(_) => Err(RaftError::Fatal(Fatal::Stopped)),
        },
        Err(fatal) => Err(RaftError::Fatal(fatal)),
    }
}

/// Hands each writer its response.
fn deliver(outcome: Result<Vec<Vec<u8>>, WriteError>, replies: Vec<Reply>) {
    match outcome {
        Ok(responses) => {
            assert_eq!(responses.len(), replies.len(), "one response per command");
            for (reply, response) in replies.into_iter().zip(responses) {
                // The writer may have timed out and left.
                let _ = reply.send(Ok(response));
            }
        }
        Err(error) => {
            for reply in replies {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}

fn write_error(raft: &Raft, error: RaftError<u64, ClientWriteError<u64, BasicNode>>) -> WriteError {
    match error {
        RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
            forward_to_leader(raft, forward)
        }
        RaftError::APIError(ClientWriteError::ChangeMembershipError(error)) => {
            unreachable!("a normal write never changes membership: {error}")
        }
        RaftError::Fatal(fatal) => WriteError::Stopped { reason: fatal.to_string() },
    }
}

/// The leader's address from the error, or else from this node's membership.
pub(crate) fn forward_to_leader(
    raft: &Raft,
    forward: ForwardToLeader<u64, BasicNode>,
) -> WriteError {
    let leader_addr = match forward.leader_node {
        Some(node) => Some(node.addr),
        None => {
            let info = ClusterInfo::from_metrics(&raft.metrics().borrow());
            info.leader_addr
                .filter(|_| forward.leader_id.is_some() && info.leader_id == forward.leader_id)
        }
    };
    WriteError::ForwardToLeader { leader_id: forward.leader_id, leader_addr }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(together: usize) -> (Pending, oneshot::Receiver<Result<Vec<u8>, WriteError>>) {
        let (reply, answer) = oneshot::channel();
        (Pending { command: vec![0; 100], reply, together }, answer)
    }

    /// Sends writes of `together` to `requests` after `after` (once the gathering waits, when
    /// zero: tokio's timers tick in milliseconds), one after the other.
    fn send_later(requests: &mpsc::Sender<Pending>, after: Duration, together: &[usize]) {
        let (requests, together) = (requests.clone(), together.to_vec());
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            for together in together {
                tokio::task::yield_now().await;
                let (write, _answer) = pending(together);
                requests.send(write).await.expect("the receiver waits");
            }
        });
    }

    /// Gathers an entry from `first` with no pace (the first entry's: no wait of its own);
    /// the writes gathered, and how long the gathering took.
    async fn gathered(first: Pending, receiver: &mut mpsc::Receiver<Pending>) -> (usize, Duration) {
        gathered_after(BatchPace::default(), first, receiver).await
    }

    /// [`gathered`] after an entry that set `pace`.
    async fn gathered_after(
        pace: BatchPace,
        first: Pending,
        receiver: &mut mpsc::Receiver<Pending>,
    ) -> (usize, Duration) {
        let started = Instant::now();
        let mut batch = Gathered::new(first, 1 << 20);
        assert!(batch.gather(receiver, pace).await.is_none(), "all fit");
        (batch.writes.len(), started.elapsed())
    }

    /// The pace an entry of `writes` (each sent with `together` in all) left (a round of 4 ms:
    /// a linger of whole milliseconds, as tokio's timers tick).
    fn pace_after(writes: usize, together: usize) -> BatchPace {
        BatchPace::new(writes * writer_share(together), Duration::from_millis(4))
    }

    /// An entry of one client's writes sent together answered one writer, who may come back
    /// with a single write: it goes at once (a `TaskLoader`'s last ask of a pass, after a
    /// pair); after two writers, a write alone waits for the other up to the linger.
    #[tokio::test(start_paused = true)]
    async fn a_writer_of_writes_sent_together_is_waited_for_once() {
        let (_requests, mut receiver) = mpsc::channel(16);
        let (first, _answer) = pending(1);
        assert_eq!(
            gathered_after(pace_after(2, 2), first, &mut receiver).await,
            (1, Duration::ZERO)
        );
        let (first, _answer) = pending(1);
        let linger = pace_after(2, 1).linger();
        assert_eq!(gathered_after(pace_after(2, 1), first, &mut receiver).await, (1, linger));
    }

    #[tokio::test(start_paused = true)]
    async fn writes_sent_together_share_an_entry() {
        let (requests, mut receiver) = mpsc::channel(16);
        send_later(&requests, Duration::ZERO, &[2]);
        let (first, _answer) = pending(2);
        assert_eq!(gathered(first, &mut receiver).await, (2, Duration::ZERO));
    }

    #[tokio::test(start_paused = true)]
    async fn a_missing_partner_is_waited_for_no_longer_than_the_linger() {
        let (requests, mut receiver) = mpsc::channel(16);
        send_later(&requests, Duration::from_millis(5), &[3]);
        let (first, _answer) = pending(3);
        assert_eq!(gathered(first, &mut receiver).await, (1, TOGETHER_LINGER));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_sent_alone_waits_for_nothing() {
        let (requests, mut receiver) = mpsc::channel(16);
        send_later(&requests, Duration::ZERO, &[1]);
        let (first, _answer) = pending(1);
        assert_eq!(gathered(first, &mut receiver).await, (1, Duration::ZERO));
    }

    /// A later write saying more were sent with it makes the entry wait for those too.
    #[tokio::test(start_paused = true)]
    async fn the_largest_group_gathered_is_waited_for() {
        let (requests, mut receiver) = mpsc::channel(16);
        send_later(&requests, Duration::ZERO, &[3, 3]);
        let (first, _answer) = pending(2);
        assert_eq!(gathered(first, &mut receiver).await, (3, Duration::ZERO));
    }
}
