//! The client side of the Raft transport: openraft's RPCs as bincode payloads over tonic,
//! AppendEntries on a stream per peer ([`AppendStream`]), the others as unary calls.
//! A peer that cannot be reached (refused, reset, timed out) is `Unreachable`, so openraft
//! backs off instead of hammering it.

use std::collections::BTreeMap;
use std::error::Error;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{AnyError, BasicNode};
use proto::raft::raft_service_client::RaftServiceClient;
use proto::raft::{RaftReply, RaftRequest};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;
use tonic::transport::Endpoint;

use crate::append_stream::{self, AppendStream};
use crate::codec;
use crate::peer_reach::PeerReach;
use crate::TypeConfig;
use platform::security::{RpcChannel, Security, SecurityError};
use platform::{StreamFailure, MESSAGE_BYTES_MAX};

/// Giving up on a TCP connect after this long makes the peer `Unreachable`.
const CONNECT_TIMEOUT_MS: u64 = 1_000;

/// Creates one [`NetworkConnection`] per peer; connections are made on first use.
#[derive(Clone, Debug)]
pub struct Network {
    retry_after: Duration,
    security: Security,
    raft_addrs: BTreeMap<u64, String>,
    /// Each peer's reachability, shared by every connection to it: openraft makes a new one
    /// for each election's vote requests, which would each log the peer down afresh.
    reach: Arc<Mutex<BTreeMap<u64, Arc<Mutex<PeerReach>>>>>,
}

/// The link to one peer. The tonic channel reconnects by itself after a failure.
pub struct NetworkConnection {
    target: u64,
    node: BasicNode,
    client: Option<RaftServiceClient<RpcChannel>>,
    appends: AppendPath,
    retry_after: Duration,
    security: Security,
    reach: Arc<Mutex<PeerReach>>,
}

/// How a connection sends AppendEntries.
enum AppendPath {
    /// On a stream ([`AppendStream`]); `None` until one is open, and after one failed.
    Stream(Option<AppendStream>),
    /// As unary calls: the peer's build has no stream (it answered `UNIMPLEMENTED`).
    Unary,
}

impl Network {
    /// After a peer was unreachable, the leader tries it again every `retry_after` (openraft's
    /// default is 500 ms). A restarted replica that hears no leader for an election timeout
    /// campaigns, so the leader must find it again within one heartbeat interval.
    /// Every connection uses `security`'s TLS and token; a peer listed in `raft_addrs` is
    /// dialled there instead of at its membership address.
    pub fn new(
        retry_after: Duration,
        security: Security,
        raft_addrs: BTreeMap<u64, String>,
    ) -> Self {
        Self { retry_after, security, raft_addrs, reach: Arc::default() }
    }

    /// Peer `target`'s reachability, made on first use.
    fn reach_of(&self, target: u64) -> Arc<Mutex<PeerReach>> {
        let mut reach = self.reach.lock().unwrap_or_else(PoisonError::into_inner);
        let peer =
            reach.entry(target).or_insert_with(|| Arc::new(Mutex::new(PeerReach::new(target))));
        Arc::clone(peer)
    }
}

#[derive(Clone, Copy, Debug)]
enum Rpc {
    AppendEntries,
    Vote,
    InstallSnapshot,
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = NetworkConnection;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> NetworkConnection {
        let (retry_after, security) = (self.retry_after, self.security.clone());
        let node = match self.raft_addrs.get(&target) {
            Some(addr) => BasicNode::new(addr),
            None => node.clone(),
        };
        let reach = self.reach_of(target);
        let appends = AppendPath::Stream(None);
        NetworkConnection { target, node, client: None, appends, retry_after, security, reach }
    }
}

/// The tonic endpoint every Raft client uses: nodelay, bounded connect, large windows.
pub fn endpoint(security: &Security, addr: &str) -> Result<Endpoint, SecurityError> {
    platform::endpoint(security, addr, Duration::from_millis(CONNECT_TIMEOUT_MS))
}

/// A Raft service client with this crate's message limits.
pub fn raft_client(channel: RpcChannel) -> RaftServiceClient<RpcChannel> {
    RaftServiceClient::new(channel)
        .max_decoding_message_size(MESSAGE_BYTES_MAX)
        .max_encoding_message_size(MESSAGE_BYTES_MAX)
}

impl NetworkConnection {
    fn client(&mut self) -> Result<RaftServiceClient<RpcChannel>, Unreachable> {
        if let Some(client) = &self.client {
            return Ok(client.clone());
        }
        let endpoint =
            endpoint(&self.security, &self.node.addr).map_err(|error| Unreachable::new(&error))?;
        let client = raft_client(self.security.channel(&endpoint));
        self.client = Some(client.clone());
        Ok(client)
    }

    /// One RPC, its peer's reachability noted (`PeerReach`).
    async fn call<Request, Reply, E>(
        &mut self,
        rpc: Rpc,
        request: &Request,
        option: &RPCOption,
    ) -> RpcResult<Reply, E>
    where
        Request: Serialize,
        Reply: DeserializeOwned,
        E: Error + DeserializeOwned,
    {
        let deadline = Instant::now() + option.hard_ttl();
        let result = match encode(request) {
            Ok(request) => self.send(rpc, request, deadline).await,
            Err(error) => Err(RPCError::Network(error)),
        };
        self.note_reach(&result);
        result
    }

    /// Notes in the peer's reachability what `result` says about it.
    fn note_reach<T, E: Error>(&self, result: &RpcResult<T, E>) {
        let now = std::time::Instant::now();
        let mut reach = self.reach.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Err(RPCError::Unreachable(error)) => {
                reach.unreachable(&self.node.addr, error, now);
            }
            _ => {
                reach.answered(&self.node.addr, now);
            }
        }
    }

    /// Sends `request` (appends on the stream while the peer has one) and decodes the answer.
    async fn send<Reply, E>(
        &mut self,
        rpc: Rpc,
        request: RaftRequest,
        deadline: Instant,
    ) -> RpcResult<Reply, E>
    where
        Reply: DeserializeOwned,
        E: Error + DeserializeOwned,
    {
        let reply = match rpc {
            Rpc::AppendEntries => self.append(request, deadline).await?,
            Rpc::Vote | Rpc::InstallSnapshot => self.unary(rpc, request, deadline).await?,
        };
        let result: Result<Reply, RaftError<u64, E>> = codec::decode(&reply.payload)
            .map_err(|error| RPCError::Network(NetworkError::new(&error)))?;
        result.map_err(|error| {
            RPCError::RemoteError(RemoteError::new_with_node(self.target, self.node.clone(), error))
        })
    }

    /// One unary call.
    async fn unary<E: Error>(
        &mut self,
        rpc: Rpc,
        request: RaftRequest,
        deadline: Instant,
    ) -> RpcResult<RaftReply, E> {
        let mut client = self.client().map_err(RPCError::Unreachable)?;
        let call = async move {
            match rpc {
                Rpc::AppendEntries => client.append_entries(request).await,
                Rpc::Vote => client.vote(request).await,
                Rpc::InstallSnapshot => client.install_snapshot(request).await,
            }
        };
        match tokio::time::timeout_at(deadline, call).await {
            Ok(Ok(reply)) => Ok(reply.into_inner()),
            Ok(Err(status)) => Err(self.status_error(status)),
            Err(_elapsed) => Err(self.no_reply(rpc)),
        }
    }

    /// One append on the peer's stream, or unary when it has none. A stream that was already
    /// open may have ended meanwhile (its body deadline, a reconnect): the append is sent again
    /// on a new one (AppendEntries is idempotent), so that costs no back-off.
    async fn append<E: Error>(
        &mut self,
        request: RaftRequest,
        deadline: Instant,
    ) -> RpcResult<RaftReply, E> {
        let AppendPath::Stream(open) = &mut self.appends else {
            return self.unary(Rpc::AppendEntries, request, deadline).await;
        };
        if let Some(mut stream) = open.take().filter(append_stream::fresh) {
            match stream.call(request.clone(), deadline).await {
                Ok(reply) => {
                    self.appends = AppendPath::Stream(Some(stream));
                    return Ok(reply);
                }
                // The deadline has passed: a new stream could only be opened and reset at once.
                Err(StreamFailure::TimedOut) => return Err(self.no_reply(Rpc::AppendEntries)),
                Err(StreamFailure::Ended | StreamFailure::Status(_)) => {}
            }
        }
        match self.append_on_new_stream(request.clone(), deadline).await {
            Ok(reply) => Ok(reply),
            Err(StreamFailure::Status(status)) if status.code() == tonic::Code::Unimplemented => {
                tracing::info!(
                    node = self.target,
                    "the peer has no append stream; appending unary"
                );
                self.appends = AppendPath::Unary;
                self.unary(Rpc::AppendEntries, request, deadline).await
            }
            Err(StreamFailure::Status(status)) => Err(self.status_error(status)),
            Err(StreamFailure::Ended) => {
                Err(self.unreachable("the append stream ended unanswered"))
            }
            Err(StreamFailure::TimedOut) => Err(self.no_reply(Rpc::AppendEntries)),
        }
    }

    /// Opens a stream, sends the append on it, and keeps the stream for the next once answered.
    async fn append_on_new_stream(
        &mut self,
        request: RaftRequest,
        deadline: Instant,
    ) -> Result<RaftReply, StreamFailure> {
        let mut client = self.client().map_err(|error| {
            StreamFailure::Status(tonic::Status::unavailable(error.to_string()))
        })?;
        let mut stream = append_stream::open(&mut client, deadline).await?;
        let reply = stream.call(request, deadline).await?;
        self.appends = AppendPath::Stream(Some(stream));
        Ok(reply)
    }

    fn no_reply<E: Error>(&self, rpc: Rpc) -> RPCError<u64, BasicNode, RaftError<u64, E>> {
        self.unreachable(&format!("{rpc:?} to node {} got no reply in time", self.target))
    }

    fn unreachable<E: Error>(&self, why: &str) -> RPCError<u64, BasicNode, RaftError<u64, E>> {
        RPCError::Unreachable(Unreachable::new(&AnyError::error(why)))
    }

    fn status_error<E: Error>(
        &self,
        status: tonic::Status,
    ) -> RPCError<u64, BasicNode, RaftError<u64, E>> {
        match status.code() {
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => {
                RPCError::Unreachable(Unreachable::new(&status))
            }
            _ => RPCError::Network(NetworkError::new(&status)),
        }
    }
}

fn encode<T: Serialize>(request: &T) -> Result<RaftRequest, NetworkError> {
    let payload = codec::encode(request).map_err(|error| NetworkError::new(&error))?;
    Ok(RaftRequest { payload: payload.into() })
}

impl RaftNetwork<TypeConfig> for NetworkConnection {
    async fn append_entries(
        &mut self,
        request: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        self.call(Rpc::AppendEntries, &request, &option).await
    }

    async fn install_snapshot(
        &mut self,
        request: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        self.call(Rpc::InstallSnapshot, &request, &option).await
    }

    async fn vote(
        &mut self,
        request: VoteRequest<u64>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<u64>> {
        self.call(Rpc::Vote, &request, &option).await
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.retry_after))
    }
}
