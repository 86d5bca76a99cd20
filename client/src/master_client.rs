//! `MasterClient`: finds the master leader among the `--masters` addresses, follows
//! "not leader" redirects, retries with backoff inside a deadline (or, for a trainer, until a
//! leader answers, however long that takes), and stamps every write with
//! (client id, sequence number) so that a retry after a leader change is applied exactly once.

use super::discovery::discover_leader;
use super::discovery_error::DiscoveryError;
use super::error::{
    ClientError, REFUSAL_METADATA_KEY, REFUSAL_TRY_AGAIN_LATER, RETRY_AFTER_MS_METADATA_KEY,
};
use super::known_members::KnownMembers;
use super::options::{
    ClientOptions, Jitter, CONNECT_TIMEOUT_MS, MESSAGE_BYTES_MAX, TRY_AGAIN_WAIT_MS_MAX,
    TRY_AGAIN_WAIT_MS_MIN,
};
use super::retrying::Retrying;
use crate::ask_stream::AskStreams;
use platform::security::RpcChannel;
use proto::master::master_service_client::MasterServiceClient;
use proto::master::ClientStamp;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tonic::transport::Endpoint;

/// Metadata key carrying the leader's address on an `UNAVAILABLE` reply from a follower.
pub const LEADER_METADATA_KEY: &str = "x-raftrain-leader";

pub type ServiceClient = MasterServiceClient<RpcChannel>;

pub struct MasterClient {
    /// The addresses the client was given.
    masters: Vec<String>,
    /// The members a leader last listed: asked first, so the group is found after every
    /// given address was replaced.
    learned: KnownMembers,
    options: ClientOptions,
    client_id: u64,
    next_seq: AtomicU64,
    leader: std::sync::Mutex<Option<Leader>>,
    /// The channel to each master this client followed (at most `FOLLOWED_CHANNELS_MAX`, the
    /// oldest dropped): leadership moves among a few members, and following one again reuses
    /// its connection instead of connecting anew in the middle of a failover.
    followed: std::sync::Mutex<Vec<Leader>>,
    /// Stamped writes go one at a time: the state machine keeps only the last sequence number
    /// per client, so a lower one arriving late would be refused as stale.
    writes: tokio::sync::Mutex<()>,
    jitter: Jitter,
    /// Calls waiting for a leader now (see `waiting_for_leader`).
    waiting: AtomicUsize,
    /// The job name a client given none bound itself to (`bind_job`): the group's only job
    /// when it joined, named from then on, so a second job submitted later does not make its
    /// calls ambiguous.
    bound_job: std::sync::OnceLock<String>,
    /// Its asks' stream to the master it follows (`ask_stream`).
    pub(crate) asks: AskStreams,
}

#[derive(Clone)]
struct Leader {
    addr: String,
    service: ServiceClient,
}

/// Channels kept to masters a client followed: more than a group's members, few enough that a
/// client holds a bounded number of connections.
const FOLLOWED_CHANNELS_MAX: usize = 8;

/// `UNKNOWN` may be a transport failure (worth a retry on a rediscovered leader) or a server
/// bug (never worth the whole deadline): after this many it is an error.
const UNKNOWN_ATTEMPTS_MAX: u32 = 3;

impl std::fmt::Debug for MasterClient {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("MasterClient")
            .field("masters", &self.masters)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// What to do after a failed attempt.
#[derive(Debug, PartialEq, Eq)]
enum Next {
    Redirect(String),
    Rediscover,
    /// The leader has no session for this client now (`try-again-later`): the same request
    /// after this pause.
    Wait(Duration),
    GiveUp,
}

impl MasterClient {
    /// Checks the addresses; connects lazily, on the first call.
    pub fn new(masters: &[String], options: ClientOptions) -> Result<Self, ClientError> {
        if masters.is_empty() {
            return Err(ClientError::NoMasters);
        }
        for addr in masters {
            endpoint(addr, &options)?;
        }
        let jitter = Jitter::new(options.seed);
        Ok(Self {
            masters: masters.to_vec(),
            learned: KnownMembers::default(),
            options,
            client_id: jitter.client_id(),
            jitter,
            next_seq: AtomicU64::new(1),
            leader: std::sync::Mutex::new(None),
            followed: std::sync::Mutex::new(Vec::new()),
            writes: tokio::sync::Mutex::new(()),
            waiting: AtomicUsize::new(0),
            bound_job: std::sync::OnceLock::new(),
            asks: AskStreams::default(),
        })
    }

    /// A read or an unstamped call, retried on the leader until the deadline (without one if
    /// `ClientOptions::call_deadline` is `None`). Each attempt must carry its own deadline
    /// (`timed`): the channel has none, so a long call (a dataset report, a watch stream) is
    /// not cut at the ordinary attempt timeout. Answers that are not about reaching a leader
    /// (INVALID_ARGUMENT, NOT_FOUND, INTERNAL, ...) end the call at once.
    pub(crate) async fn call<T, F, Fut>(
        &self,
        call: &'static str,
        mut attempt: F,
    ) -> Result<T, ClientError>
    where
        F: FnMut(ServiceClient) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let mut retrying = Retrying::new(call, self.options.call_deadline, &self.waiting);
        let mut unknown_count = 0;
        loop {
            let attempts = retrying.next_attempt()?;
            let leader = match self.leader().await {
                Ok(leader) => leader,
                Err(error) => {
                    tracing::debug!(call, attempts, %error, "no leader found; backing off");
                    retrying.failed(error.to_string());
                    tokio::time::sleep(self.jitter.backoff(attempts, retrying.waited())).await;
                    continue;
                }
            };
            let status = match attempt(leader.service.clone()).await {
                Ok(response) => {
                    tracing::trace!(call, attempts, addr = %leader.addr, "answered");
                    return Ok(response.into_inner());
                }
                Err(status) => status,
            };
            let error =
                format!("{} answered {:?}: {}", leader.addr, status.code(), status.message());
            tracing::debug!(call, attempts, %error, "attempt failed");
            unknown_count += u32::from(status.code() == tonic::Code::Unknown);
            match next_step(&status, unknown_count) {
                Next::Redirect(addr) if addr != leader.addr => {
                    retrying.last_error = error;
                    self.follow(&addr)?;
                }
                Next::Redirect(_) | Next::Rediscover => {
                    retrying.failed(error);
                    self.forget_leader();
                    tokio::time::sleep(self.jitter.backoff(attempts, retrying.waited())).await;
                }
                Next::Wait(pause) => {
                    if !retrying.has_time_for(pause) {
                        return Err(ClientError::from_status(call, &status));
                    }
                    tracing::warn!(call, attempts, wait_ms = pause.as_millis() as u64, %error, "the masters have no session for this client now; trying again");
                    retrying.last_error = error;
                    tokio::time::sleep(pause).await;
                }
                Next::GiveUp => return Err(ClientError::from_status(call, &status)),
            }
        }
    }

    /// Whether some call of this client is waiting for a leader right now (its last attempt
    /// found none, or none answered): what a trainer's `/readyz` reports.
    pub fn waiting_for_leader(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }

    /// A write: one stamp for the logical call, reused by every retry of it.
    pub(crate) async fn write<T, F, Fut>(
        &self,
        call: &'static str,
        mut attempt: F,
    ) -> Result<T, ClientError>
    where
        F: FnMut(ServiceClient, ClientStamp) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        let _one_at_a_time = self.writes.lock().await;
        let seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let stamp = ClientStamp { client_id: self.client_id, seq };
        self.call(call, |service| attempt(service, stamp)).await
    }

    async fn leader(&self) -> Result<Leader, DiscoveryError> {
        if let Some(leader) = self.cached_leader() {
            self.learned.refresh_if_stale(&leader.service, &self.options);
            return Ok(leader);
        }
        let learned = self.learned.members();
        let discovered = match discover_leader(&learned, &self.options).await {
            Ok(discovered) => discovered,
            // Nothing learned yet, or none of it answers: the given addresses.
            Err(_) => discover_leader(&self.masters, &self.options).await?,
        };
        self.learned.learn(&discovered.members, &self.options);
        self.follow(&discovered.leader_addr).map_err(DiscoveryError::BadLeaderAddress)?;
        self.cached_leader().ok_or(DiscoveryError::LeaderForgotten)
    }

    fn cached_leader(&self) -> Option<Leader> {
        self.leader.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    fn follow(&self, addr: &str) -> Result<(), ClientError> {
        let leader = self.followed_channel(addr)?;
        *self.leader.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(leader);
        Ok(())
    }

    /// The channel to `addr` this client made when it followed it before, or a new one (kept).
    fn followed_channel(&self, addr: &str) -> Result<Leader, ClientError> {
        let mut followed = self.followed.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(leader) = followed.iter().find(|leader| leader.addr == addr) {
            return Ok(leader.clone());
        }
        let leader =
            Leader { addr: addr.to_string(), service: service_client(addr, &self.options)? };
        if followed.len() >= FOLLOWED_CHANNELS_MAX {
            followed.remove(0);
        }
        followed.push(leader.clone());
        Ok(leader)
    }

    /// The members the last leader found listed, else the addresses the client was given.
    pub(crate) fn masters(&self) -> Vec<String> {
        let learned = self.learned.members();
        if learned.is_empty() {
            return self.masters.clone();
        }
        learned
    }

    /// The TLS and token this client connects with (other clients of the job reuse them).
    pub fn security(&self) -> &platform::security::Security {
        &self.options.security
    }

    pub(crate) fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// The deadline of one ordinary attempt.
    /// The job this client's job-scoped calls name (empty: the group's only job), or the one
    /// it bound itself to (`bind_job`).
    pub fn job(&self) -> &str {
        self.bound_job.get().map_or(&self.options.job, String::as_str)
    }

    /// A client given no job name names `job` from now on (the group's only job, which it
    /// joined); a client given one, or bound already, keeps its own.
    pub fn bind_job(&self, job: &str) {
        if self.options.job.is_empty() && !job.is_empty() {
            let _ = self.bound_job.set(job.to_string());
        }
    }

    /// The id this client stamps its writes with.
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    pub(crate) fn rpc_timeout(&self) -> Duration {
        self.options.rpc_timeout
    }

    /// The address of the leader this client follows now, if it knows one and can tell without
    /// waiting (`None` while another thread updates it: this may run in a forked child, where
    /// a lock held by one of the parent's threads is never released).
    pub fn leader_hint(&self) -> Option<String> {
        match self.leader.try_lock() {
            Ok(leader) => leader.as_ref().map(|leader| leader.addr.clone()),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                poisoned.into_inner().as_ref().map(|leader| leader.addr.clone())
            }
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Follows `addr` as the leader, without asking the masters who leads, unless this client
    /// already knows a leader: what another client of the same process found a moment ago. A
    /// hint gone stale costs a redirect, or a discovery, on the first call.
    pub fn follow_hint(&self, addr: &str) -> Result<(), ClientError> {
        if self.cached_leader().is_some() {
            return Ok(());
        }
        self.follow(addr)
    }

    /// Forgets the cached leader: the next call looks for it afresh (a caller that gave up on
    /// a call, say a heartbeat gone unanswered, knows something the client does not).
    pub fn forget_leader(&self) {
        *self.leader.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }
}

/// `message` with a deadline for this attempt, carried as `grpc-timeout` and enforced by the
/// channel and the server alike.
pub(crate) fn timed<T>(message: T, timeout: Duration) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.set_timeout(timeout);
    request
}

fn next_step(status: &tonic::Status, unknown_count: u32) -> Next {
    use tonic::Code;
    // Refused by a stopping master's GOAWAY (INTERNAL, from h2) or dropped unsent: no master
    // acted on it, and the one that said GOAWAY is leaving.
    if crate::never_sent(status) {
        return Next::Rediscover;
    }
    match status.code() {
        Code::Unavailable => match status.metadata().get(LEADER_METADATA_KEY) {
            Some(value) => match value.to_str() {
                Ok(addr) if !addr.is_empty() => Next::Redirect(addr.to_string()),
                _ => Next::Rediscover,
            },
            None => Next::Rediscover,
        },
        // Transport failures and timeouts: the leader may have died or moved.
        Code::DeadlineExceeded | Code::Cancelled | Code::Aborted => Next::Rediscover,
        Code::Unknown if unknown_count < UNKNOWN_ATTEMPTS_MAX => Next::Rediscover,
        Code::ResourceExhausted if refusal(status) == Some(REFUSAL_TRY_AGAIN_LATER) => {
            Next::Wait(try_again_wait(status))
        }
        // INTERNAL is a bug, not a leader change: retrying for the whole deadline hides it.
        _ => Next::GiveUp,
    }
}

fn refusal(status: &tonic::Status) -> Option<&str> {
    status.metadata().get(REFUSAL_METADATA_KEY).and_then(|value| value.to_str().ok())
}

/// The pause the master asked for, within `TRY_AGAIN_WAIT_MS_MIN..=TRY_AGAIN_WAIT_MS_MAX`.
fn try_again_wait(status: &tonic::Status) -> Duration {
    let asked = status.metadata().get(RETRY_AFTER_MS_METADATA_KEY);
    let asked_ms = asked.and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    let wait_ms = asked_ms.unwrap_or(TRY_AGAIN_WAIT_MS_MAX);
    Duration::from_millis(wait_ms.clamp(TRY_AGAIN_WAIT_MS_MIN, TRY_AGAIN_WAIT_MS_MAX))
}

/// An endpoint with the client's timeouts, nodelay and large-message windows.
pub(crate) fn endpoint(addr: &str, options: &ClientOptions) -> Result<Endpoint, ClientError> {
    crate::master_addr::check_master_addr(addr).map_err(|error| ClientError::BadAddress {
        addr: addr.to_string(),
        reason: error.to_string(),
    })?;
    let endpoint = options.security.endpoint(addr).map_err(|error| ClientError::BadAddress {
        addr: addr.to_string(),
        reason: error.to_string(),
    })?;
    // No channel-wide timeout: each attempt carries its own (`timed`), so a dataset report or
    // a watch stream may last longer than an ordinary call.
    Ok(endpoint
        .connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
        .tcp_nodelay(true)
        .initial_stream_window_size(16 << 20)
        .initial_connection_window_size(64 << 20))
}

pub(crate) fn service_client(
    addr: &str,
    options: &ClientOptions,
) -> Result<ServiceClient, ClientError> {
    let channel = match &options.dialer {
        Some(dialer) => (dialer.0)(addr),
        None => options.security.channel(&endpoint(addr, options)?),
    };
    Ok(MasterServiceClient::new(channel)
        .max_decoding_message_size(MESSAGE_BYTES_MAX)
        .max_encoding_message_size(MESSAGE_BYTES_MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: tonic::Code, leader: Option<&str>) -> tonic::Status {
        let mut status = tonic::Status::new(code, "test");
        if let Some(addr) = leader {
            let value = tonic::metadata::MetadataValue::try_from(addr).expect("ascii");
            status.metadata_mut().insert(LEADER_METADATA_KEY, value);
        }
        status
    }

    /// RESOURCE_EXHAUSTED marked `try-again-later`, asking for `retry_after_ms`.
    fn try_again(retry_after_ms: &'static str) -> tonic::Status {
        use tonic::metadata::MetadataValue;
        let mut status = tonic::Status::resource_exhausted("test");
        let metadata = status.metadata_mut();
        metadata.insert(REFUSAL_METADATA_KEY, MetadataValue::from_static(REFUSAL_TRY_AGAIN_LATER));
        metadata.insert(RETRY_AFTER_MS_METADATA_KEY, MetadataValue::from_static(retry_after_ms));
        status
    }

    /// Each gRPC code leads to the right step; UNKNOWN only a few times, INTERNAL never; a
    /// `try-again-later` refusal waits as long as the master asked, within bounds, and any
    /// other RESOURCE_EXHAUSTED (a message too large) is final.
    #[test]
    fn next_step_per_code() {
        use tonic::Code;
        let redirect = Next::Redirect("10.0.0.1:1".to_string());
        let cases = [
            (status(Code::Unavailable, Some("10.0.0.1:1")), 0, redirect),
            (status(Code::Unavailable, None), 0, Next::Rediscover),
            (status(Code::DeadlineExceeded, None), 0, Next::Rediscover),
            (status(Code::Cancelled, None), 0, Next::Rediscover),
            (status(Code::Unknown, None), 1, Next::Rediscover),
            (status(Code::Unknown, None), UNKNOWN_ATTEMPTS_MAX, Next::GiveUp),
            (status(Code::Internal, None), 0, Next::GiveUp),
            (status(Code::InvalidArgument, None), 0, Next::GiveUp),
            (try_again("3000"), 0, Next::Wait(Duration::from_secs(3))),
            (try_again("0"), 0, Next::Wait(Duration::from_millis(TRY_AGAIN_WAIT_MS_MIN))),
            (try_again("300001"), 0, Next::Wait(Duration::from_millis(TRY_AGAIN_WAIT_MS_MAX))),
            (try_again("soon"), 0, Next::Wait(Duration::from_millis(TRY_AGAIN_WAIT_MS_MAX))),
            (status(Code::ResourceExhausted, None), 0, Next::GiveUp),
        ];
        for (status, unknown_count, expected) in cases {
            assert_eq!(next_step(&status, unknown_count), expected, "{status:?}");
        }
    }

    /// A call a stopping master's GOAWAY refused comes back INTERNAL, which is otherwise final:
    /// it is looked for again, since no master acted on it.
    #[tokio::test]
    async fn a_call_refused_by_a_goaway_is_tried_again() {
        use crate::never_sent::raw_peer::{call_against, Peer};
        let refused = call_against(Peer::GoAway { last: 0 }).await;
        assert_eq!(refused.code(), tonic::Code::Internal, "{refused:?}");
        assert_eq!(next_step(&refused, 0), Next::Rediscover);
    }
}
