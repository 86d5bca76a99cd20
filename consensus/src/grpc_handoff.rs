//! `GrpcHandoff`: the `TimeoutNow` of a leadership handoff over the Raft service, dialled
//! like every Raft peer (the member's `--peer-addrs` entry when it has one, its TLS and token).

use std::collections::BTreeMap;
use std::time::Duration;

use proto::raft::RaftRequest;

use crate::codec;
use crate::handoff::{HandoffTransport, SendFuture, TimeoutNow};
use crate::network::{endpoint, raft_client};
use crate::timeout_now_error::TimeoutNowError;
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

    async fn send(&self, addr: &str, request: TimeoutNow) -> Result<(), TimeoutNowError> {
        let not_sent =
            |error: &dyn std::fmt::Display| TimeoutNowError::NotSent { reason: error.to_string() };
        let payload = codec::encode(&request).map_err(|error| not_sent(&error))?;
        let endpoint = endpoint(&self.security, addr).map_err(|error| not_sent(&error))?;
        let mut client = raft_client(self.security.channel(&endpoint));
        let call = client.timeout_now(RaftRequest { payload: payload.into() });
        let addr = addr.to_string();
        let reply = tokio::time::timeout(Duration::from_millis(TIMEOUT_NOW_RPC_MS), call)
            .await
            .map_err(|_elapsed| TimeoutNowError::NoAnswer {
                addr: addr.clone(),
                timeout_ms: TIMEOUT_NOW_RPC_MS,
            })?
            .map_err(|status| TimeoutNowError::Status {
                addr: addr.clone(),
                status: status.to_string(),
            })?;
        // The follower's refusal travels as its text (see `TimeoutNowError::Refused`).
        let answer: Result<(), String> = codec::decode(&reply.into_inner().payload)
            .map_err(|error| TimeoutNowError::Undecodable { addr, error: error.to_string() })?;
        answer.map_err(|reason| TimeoutNowError::Refused { reason })
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
