//! The client side of the Raft transport: openraft's RPCs as bincode payloads over tonic.
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
use proto::raft::RaftRequest;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::Endpoint;

use crate::codec;
use crate::peer_reach::PeerReach;
use crate::TypeConfig;
use platform::security::{RpcChannel, Security, SecurityError};
use platform::MESSAGE_BYTES_MAX;

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
    retry_after: Duration,
    security: Security,
    reach: Arc<Mutex<PeerReach>>,
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
        NetworkConnection { target, node, client: None, retry_after, security, reach }
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
        let result = self.call_once(rpc, request, option).await;
        let now = std::time::Instant::now();
        let mut reach = self.reach.lock().unwrap_or_else(PoisonError::into_inner);
        match &result {
            Err(RPCError::Unreachable(error)) => {
                reach.unreachable(&self.node.addr, error, now);
            }
            _ => {
                reach.answered(&self.node.addr, now);
            }
        }
        drop(reach);
        result
    }

    async fn call_once<Request, Reply, E>(
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
        let payload =
            codec::encode(request).map_err(|error| RPCError::Network(NetworkError::new(&error)))?;
        let mut client = self.client().map_err(RPCError::Unreachable)?;
        let request = RaftRequest { payload: payload.into() };
        let call = async move {
            match rpc {
                Rpc::AppendEntries => client.append_entries(request).await,
                Rpc::Vote => client.vote(request).await,
                Rpc::InstallSnapshot => client.install_snapshot(request).await,
            }
        };
        let timeout = option.hard_ttl();
        let reply = match tokio::time::timeout(timeout, call).await {
            Ok(Ok(reply)) => reply.into_inner(),
            Ok(Err(status)) => return Err(self.status_error(status)),
            Err(_elapsed) => {
                let message =
                    format!("{rpc:?} to node {} got no reply in {timeout:?}", self.target);
                return Err(RPCError::Unreachable(Unreachable::new(&AnyError::error(message))));
            }
        };
        let result: Result<Reply, RaftError<u64, E>> = codec::decode(&reply.payload)
            .map_err(|error| RPCError::Network(NetworkError::new(&error)))?;
        result.map_err(|error| {
            RPCError::RemoteError(RemoteError::new_with_node(self.target, self.node.clone(), error))
        })
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
