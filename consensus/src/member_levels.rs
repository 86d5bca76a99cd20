//! `MemberLevels`: what feature level each member of the group says it decodes, asked over the
//! Raft service's `ClusterInfo` (the member's `--peer-addrs` entry when it has one, its TLS and
//! token), so a leader proposes a newer kind of command only once every member decodes it. The
//! simulation answers in process; `GrpcMemberLevels` is the production transport.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proto::raft::raft_service_client::RaftServiceClient;
use proto::raft::{ClusterInfoReply, ClusterInfoRequest};

use crate::network::{endpoint, raft_client};
use platform::security::{RpcChannel, Security};

/// One member may take this long to answer: an unanswered member counts as unknown.
const LEVEL_RPC_MS: u64 = 1_000;

/// A member's answer: its feature level (0 from a build before levels), or `None` when it did
/// not answer (down, cut off, or the call failed), so nothing may be assumed about it.
pub type LevelFuture<'a> = Pin<Box<dyn Future<Output = Option<u32>> + Send + 'a>>;

/// Asks one member its feature level.
pub trait MemberLevels: Send + Sync {
    /// The level member `id`, at `addr` (its membership address), answers.
    fn level<'a>(&'a self, id: u64, addr: &'a str) -> LevelFuture<'a>;
}

/// Asks each member in turn and collects the answers by id.
pub async fn ask_all(
    probe: &dyn MemberLevels,
    members: &[(u64, String)],
) -> BTreeMap<u64, Option<u32>> {
    let mut answers = BTreeMap::new();
    for (id, addr) in members {
        answers.insert(*id, probe.level(*id, addr).await);
    }
    answers
}

/// The production [`MemberLevels`]. Clones share one connection per member address, so
/// asking every few seconds (the level raise, a removed member's watch) opens no new
/// connection each time; a tonic channel reconnects by itself.
#[derive(Clone)]
pub struct GrpcMemberLevels {
    security: Security,
    raft_addrs: BTreeMap<u64, String>,
    clients: Arc<Mutex<HashMap<String, RaftServiceClient<RpcChannel>>>>,
}

impl std::fmt::Debug for GrpcMemberLevels {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("GrpcMemberLevels")
            .field("raft_addrs", &self.raft_addrs)
            .finish_non_exhaustive()
    }
}

/// Connections kept at most (a group has at most `MEMBERS_MAX` members; past this the cache
/// starts over).
const CLIENTS_MAX: usize = 16;

impl GrpcMemberLevels {
    /// Dials members with `security`, at their `raft_addrs` entry when listed.
    pub fn new(security: Security, raft_addrs: BTreeMap<u64, String>) -> Self {
        Self { security, raft_addrs, clients: Arc::default() }
    }

    /// The Raft service client of `addr`: the one made before, or a new one (kept).
    fn client(&self, addr: &str) -> Result<RaftServiceClient<RpcChannel>, String> {
        let mut clients = self.clients.lock().unwrap_or_else(|poison| poison.into_inner());
        if let Some(client) = clients.get(addr) {
            return Ok(client.clone());
        }
        let endpoint = endpoint(&self.security, addr).map_err(|error| error.to_string())?;
        let client = raft_client(self.security.channel(&endpoint));
        if clients.len() >= CLIENTS_MAX {
            clients.clear();
        }
        clients.insert(addr.to_string(), client.clone());
        Ok(client)
    }

    async fn ask(&self, addr: &str) -> Option<u32> {
        match self.cluster_info_at(addr).await {
            Ok(reply) => Some(reply.feature_level),
            Err(reason) => {
                tracing::debug!(%addr, %reason, "a member did not say its feature level");
                None
            }
        }
    }

    /// What member `id` (at `addr`, or its `raft_addrs` entry) says about itself and its
    /// group, asked of its Raft service within a second; `Err` says why there is no answer.
    pub async fn cluster_info(&self, id: u64, addr: &str) -> Result<ClusterInfoReply, String> {
        let addr = self.raft_addrs.get(&id).map_or(addr, String::as_str);
        self.cluster_info_at(addr).await
    }

    /// What the master whose Raft service is at `addr` says about itself and its group.
    pub async fn cluster_info_at(&self, addr: &str) -> Result<ClusterInfoReply, String> {
        let mut client = self.client(addr)?;
        let call = client.cluster_info(ClusterInfoRequest { state_digest: false });
        match tokio::time::timeout(Duration::from_millis(LEVEL_RPC_MS), call).await {
            Ok(Ok(reply)) => Ok(reply.into_inner()),
            Ok(Err(status)) => Err(format!("{}: {}", status.code(), status.message())),
            Err(_elapsed) => Err(format!("no answer within {LEVEL_RPC_MS} ms")),
        }
    }
}

impl MemberLevels for GrpcMemberLevels {
    fn level<'a>(&'a self, id: u64, addr: &'a str) -> LevelFuture<'a> {
        let addr = self.raft_addrs.get(&id).map_or(addr, String::as_str);
        Box::pin(self.ask(addr))
    }
}
