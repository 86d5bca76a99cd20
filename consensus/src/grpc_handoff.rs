//! `GrpcHandoff`: the `TimeoutNow` of a leadership handoff over the Raft service, dialled
//! like every Raft peer (the member's `--peer-addrs` entry when it has one, its TLS and token).

use std::collections::BTreeMap;
use std::time::Duration;

use proto::raft::RaftRequest;

use crate::codec;
use crate::handoff::{HandoffTransport, SendFuture, TimeoutNow};
use crate::network::{endpoint, raft_client};
use platform::security::Security;

/// One attempt to reach the follower may take this long: a handoff has a few seconds in all.
const TIMEOUT_NOW_RPC_MS: u64 = 1_000;

/// The production [`HandoffTransport`].
#[derive(Clone, Debug)]
pub struct GrpcHandoff {
    security: Security,
    raft_addrs: BTreeMap<u64, String>,
}

impl GrpcHandoff {
    /// Dials members with `security`, at their `raft_addrs` entry when listed.
    pub fn new(security: Security, raft_addrs: BTreeMap<u64, String>) -> Self {
        Self { security, raft_addrs }
    }

    async fn send(&self, addr: &str, request: TimeoutNow) -> Result<(), String> {
        let payload = codec::encode(&request).map_err(|error| error.to_string())?;
        let endpoint = endpoint(&self.security, addr).map_err(|error| error.to_string())?;
        let mut client = raft_client(self.security.channel(&endpoint));
        let call = client.timeout_now(RaftRequest { payload: payload.into() });
        let reply = tokio::time::timeout(Duration::from_millis(TIMEOUT_NOW_RPC_MS), call)
            .await
            .map_err(|_elapsed| format!("no answer from {addr} in {TIMEOUT_NOW_RPC_MS} ms"))?
            .map_err(|status| format!("{addr} answered {status}"))?;
        let answer: Result<(), String> = codec::decode(&reply.into_inner().payload)
            .map_err(|error| format!("the answer of {addr} does not decode: {error}"))?;
        answer
    }
}

impl HandoffTransport for GrpcHandoff {
    fn timeout_now<'a>(
        &'a self,
        target: u64,
        addr: &'a str,
        request: TimeoutNow,
    ) -> SendFuture<'a> {
        let addr = self.raft_addrs.get(&target).map_or(addr, String::as_str);
        Box::pin(self.send(addr, request))
    }
}
