//! What a node does with each incoming Raft RPC: hand it to openraft, and let [`StepUp`] watch
//! AppendEntries and votes. The gRPC service and the tests' in-memory router both go through
//! here, so the tests exercise the same handling as the wire.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use crate::step_up::StepUp;
use crate::{Raft, TypeConfig};

/// The receiving end of the Raft RPCs of one node; cheap to clone.
#[derive(Clone)]
pub struct RpcHandler {
    raft: Raft,
    step_up: Arc<StepUp>,
}

impl RpcHandler {
    /// The handler of `raft`, whose leader lease (`election_timeout_max`) is `leader_lease`.
    /// Every transport of the node must share this one handler (clones of it).
    pub fn new(raft: Raft, leader_lease: Duration) -> Self {
        Self { raft, step_up: Arc::new(StepUp::new(leader_lease)) }
    }

    pub async fn append_entries(
        &self,
        request: AppendEntriesRequest<TypeConfig>,
    ) -> Result<AppendEntriesResponse<u64>, RaftError<u64>> {
        let result = self.raft.append_entries(request).await;
        self.step_up.after_append(&result);
        result
    }

    pub async fn vote(
        &self,
        request: VoteRequest<u64>,
    ) -> Result<VoteResponse<u64>, RaftError<u64>> {
        let result = self.raft.vote(request.clone()).await;
        if let Ok(response) = &result {
            self.step_up.after_vote(&self.raft, &request, response);
        }
        result
    }

    pub async fn install_snapshot(
        &self,
        request: InstallSnapshotRequest<TypeConfig>,
    ) -> Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>> {
        self.raft.install_snapshot(request).await
    }

    /// The node's `Raft` handle (for `ClusterInfo` and metrics).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }
}
