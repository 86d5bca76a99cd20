//! `Together` and `AskGather`: asks of several trainers of one process started at once (the
//! Python loader's registrations asking ahead together). Gathered, they go to the leader in
//! one `GetTasks` call instead of one `GetTask` each, and the masters write them in one log
//! entry either way; each ask keeps its own stamp, receipts and answer, and a retry of one goes
//! alone. A master of a build without `GetTasks` answers `UNIMPLEMENTED`: the asks are then sent
//! each in its own call, as before, and this process sends that master none for a while.

use super::error::ClientError;
use super::hand_off::ASKS_TOGETHER_MAX;
use super::master_client::{timed, ServiceClient};
use proto::master as pb;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, Notify};
use tonic::Status;

/// How long the call waits, after its first ask, for the others it gathers: they are started
/// one right after the other, so this bounds only a caller that started fewer than it said.
const GATHER_WAIT: Duration = Duration::from_millis(2);
/// How long after a master answered `GetTasks` with `UNIMPLEMENTED` this process sends it each
/// ask alone without trying the call (a rolling upgrade may replace its build meanwhile).
const UNGATHERED_FOR: Duration = Duration::from_secs(60);
/// The most masters remembered as refusing `GetTasks` (the oldest forgotten first).
const REFUSERS_MAX: usize = 16;

/// The masters (addresses) that answered `GetTasks` with `UNIMPLEMENTED`, and when.
static REFUSERS: Mutex<Vec<(String, Instant)>> = Mutex::new(Vec::new());

/// How an ask is sent: alone, as one of `count` asks sent at once each in its own call (the
/// masters hold each one's write a moment for the others), or gathered with the others of an
/// [`AskGather`] in one call.
#[derive(Clone, Debug)]
pub enum Together {
    Alone,
    Sent(u32),
    Gathered(Arc<AskGather>),
}

impl Together {
    /// How many asks (this one included) are sent at once.
    pub fn count(&self) -> u32 {
        match self {
            Self::Alone => 1,
            Self::Sent(count) => *count,
            Self::Gathered(gather) => gather.count,
        }
    }

    /// Whether the ask goes alone, in a call of its own with no others.
    pub fn is_alone(&self) -> bool {
        matches!(self, Self::Alone | Self::Sent(0 | 1))
    }

    pub(crate) fn gather(&self) -> Option<&Arc<AskGather>> {
        match self {
            Self::Gathered(gather) => Some(gather),
            Self::Alone | Self::Sent(_) => None,
        }
    }
}

/// The asks of one round of several trainers' asks, sent in one `GetTasks` call by the first
/// to arrive once all `count` have (or [`GATHER_WAIT`] passed).
#[derive(Debug)]
pub struct AskGather {
    count: u32,
    gathering: Mutex<Gathering>,
    full: Notify,
    /// The round's call was answered (each ask with its own answer or refusal).
    answered_in_one_call: AtomicBool,
}

#[derive(Debug, Default)]
struct Gathering {
    asks: Vec<Gathered>,
    /// The master the call goes to, the first ask's: an ask whose client follows another (a
    /// client of another group, or one that has not learned of a new leader) goes alone.
    addr: Option<String>,
    /// Asks of the round that went alone for following another master.
    alone: usize,
    /// The call went: an ask arriving now (a retry, or one too late) goes alone.
    sent: bool,
}

impl Gathering {
    /// The round's asks that arrived: gathered, or gone alone.
    fn arrived(&self) -> usize {
        self.asks.len() + self.alone
    }
}

#[derive(Debug)]
struct Gathered {
    request: pb::GetTaskRequest,
    answer: oneshot::Sender<Result<pb::GetTaskReply, Status>>,
}

impl AskGather {
    /// A round of `count` asks (from 1 to [`ASKS_TOGETHER_MAX`]).
    pub fn new(count: u32) -> Result<Arc<Self>, ClientError> {
        if !(1..=ASKS_TOGETHER_MAX).contains(&count) {
            return Err(ClientError::InvalidArgument {
                call: "GetTasks",
                message: format!(
                    "{count} asks gathered; from 1 to {ASKS_TOGETHER_MAX} go in one call"
                ),
            });
        }
        let gathering = Mutex::new(Gathering::default());
        let answered_in_one_call = AtomicBool::new(false);
        Ok(Arc::new(Self { count, gathering, full: Notify::new(), answered_in_one_call }))
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether the round's asks went in one call that the leader answered (not one call
    /// each, as to a master of an older build, and not a call that failed as a whole).
    pub fn answered_in_one_call(&self) -> bool {
        self.answered_in_one_call.load(Ordering::Relaxed)
    }

    /// The answer to `request`, sent in this round's call (on `service`, the first ask's, a
    /// channel to the master at `addr`, within `timeout`); `None` when it must go alone: the
    /// call went already (this is a retry, or came too late), its client follows another
    /// master than the first ask's, or that master cannot take `GetTasks`.
    pub(crate) async fn ask(
        self: &Arc<Self>,
        (service, addr): (ServiceClient, String),
        request: pb::GetTaskRequest,
        timeout: Duration,
    ) -> Option<Result<pb::GetTaskReply, Status>> {
        if refused_recently(&addr) {
            return None;
        }
        let (answer, answered) = oneshot::channel();
        let (first, full) = {
            let mut gathering = self.lock();
            let elsewhere = gathering.addr.as_ref().is_some_and(|first| *first != addr);
            if gathering.sent || elsewhere || gathering.arrived() >= self.count as usize {
                gathering.alone += usize::from(elsewhere);
                if elsewhere && gathering.arrived() == self.count as usize {
                    self.full.notify_one();
                }
                return None;
            }
            gathering.addr.get_or_insert_with(|| addr.clone());
            gathering.asks.push(Gathered { request, answer });
            (gathering.asks.len() == 1, gathering.arrived() == self.count as usize)
        };
        if first {
            tokio::spawn(self.clone().send((service, addr), timeout));
        }
        if full {
            self.full.notify_one();
        }
        Some(answered.await.unwrap_or_else(|_| {
            Err(Status::unavailable("GetTasks: the call carrying this ask was dropped"))
        }))
    }

    /// Waits for the round's asks, then sends them in one call and hands out the answers.
    async fn send(
        self: Arc<Self>,
        (mut service, addr): (ServiceClient, String),
        timeout: Duration,
    ) {
        let _ = tokio::time::timeout(GATHER_WAIT, self.full.notified()).await;
        let asks = {
            let mut gathering = self.lock();
            gathering.sent = true;
            std::mem::take(&mut gathering.asks)
        };
        let call =
            pb::GetTasksRequest { asks: asks.iter().map(|ask| ask.request.clone()).collect() };
        match service.get_tasks(timed(call, timeout)).await {
            Ok(reply) => {
                self.answered_in_one_call.store(true, Ordering::Relaxed);
                answer(asks, reply.into_inner().answers);
            }
            Err(status) if status.code() == tonic::Code::Unimplemented => {
                remember_refuser(addr);
                send_alone(service, asks, timeout);
            }
            Err(status) => {
                for ask in asks {
                    let _ = ask.answer.send(Err(status.clone()));
                }
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Gathering> {
        self.gathering.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn refusers() -> MutexGuard<'static, Vec<(String, Instant)>> {
    REFUSERS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether the master at `addr` answered `GetTasks` with `UNIMPLEMENTED` within
/// [`UNGATHERED_FOR`].
fn refused_recently(addr: &str) -> bool {
    refusers().iter().any(|(refuser, at)| refuser == addr && at.elapsed() < UNGATHERED_FOR)
}

fn remember_refuser(addr: String) {
    let mut refusers = refusers();
    refusers.retain(|(refuser, at)| *refuser != addr && at.elapsed() < UNGATHERED_FOR);
    if refusers.len() >= REFUSERS_MAX {
        refusers.remove(0);
    }
    refusers.push((addr, Instant::now()));
}

/// Each ask its answer, in order; a call answered with another count of answers is a master's
/// fault, which each ask is told.
fn answer(asks: Vec<Gathered>, answers: Vec<pb::GetTaskAnswer>) {
    use pb::get_task_answer::Answer;
    let count = (asks.len(), answers.len());
    if count.0 != count.1 {
        let message = format!("GetTasks: {} answers to {} asks", count.1, count.0);
        for ask in asks {
            let _ = ask.answer.send(Err(Status::internal(message.clone())));
        }
        return;
    }
    for (ask, answered) in asks.into_iter().zip(answers) {
        let answered = match answered.answer {
            Some(Answer::Reply(reply)) => Ok(reply),
            Some(Answer::Refused(refusal)) => Err(refusal_status(refusal)),
            None => Err(Status::internal("GetTasks: an ask answered with nothing")),
        };
        let _ = ask.answer.send(answered);
    }
}

/// Each ask in a `GetTask` call of its own, all at once, saying how many went together.
fn send_alone(service: ServiceClient, asks: Vec<Gathered>, timeout: Duration) {
    for Gathered { request, answer } in asks {
        let mut service = service.clone();
        tokio::spawn(async move {
            let answered = service.get_task(timed(request, timeout)).await;
            let _ = answer.send(answered.map(tonic::Response::into_inner));
        });
    }
}

/// An ask's refusal as the status a `GetTask` of it alone would have failed with.
pub(crate) fn refusal_status(refusal: pb::AskRefusal) -> Status {
    let mut metadata = tonic::metadata::MetadataMap::new();
    for entry in refusal.metadata {
        let key = tonic::metadata::AsciiMetadataKey::from_bytes(entry.key.as_bytes());
        if let (Ok(key), Ok(value)) = (key, entry.value.parse()) {
            metadata.insert(key, value);
        }
    }
    Status::with_metadata(tonic::Code::from(refusal.code), refusal.message, metadata)
}
