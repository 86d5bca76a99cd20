//! `Proposer`: how the service and the leader's duties put a command into the log, stamped
//! with the leader clock, the client's stamp, and for leader decisions the term they were
//! computed in.

use super::status_mapping::write_error;
use crate::clock::Clock;
use crate::leader_clock::LeaderClock;
use crate::replicated_state::ReplicatedState;
use crate::state::{decode_response, encode_request, ClientStamp, Command, Request, Response};
use consensus::ConsensusNode;
use std::sync::Arc;
use tonic::Status;

#[derive(Clone)]
pub(crate) struct Proposer {
    node: ConsensusNode<ReplicatedState>,
    clock: Arc<LeaderClock>,
}

impl Proposer {
    pub(crate) fn new(node: ConsensusNode<ReplicatedState>, clock: Arc<dyn Clock>) -> Self {
        Self { node, clock: Arc::new(LeaderClock::new(clock)) }
    }

    pub(crate) fn node(&self) -> &ConsensusNode<ReplicatedState> {
        &self.node
    }

    /// The time a proposal made now is stamped with (the duties compare deadlines with it).
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms(&self.node)
    }

    /// Replicates a client's command and returns the state machine's answer.
    pub(crate) async fn propose(
        &self,
        client: Option<ClientStamp>,
        command: Command,
    ) -> Result<Response, Status> {
        self.replicate(Request { client, now_ms: self.now_ms(), term: None, command }).await
    }

    /// Replicates a leader decision justified by this node's soft state in `term`: it takes
    /// effect only if committed in that same term.
    pub(crate) async fn decide(&self, term: u64, command: Command) -> Result<Response, Status> {
        self.replicate(Request { client: None, now_ms: self.now_ms(), term: Some(term), command })
            .await
    }

    async fn replicate(&self, request: Request) -> Result<Response, Status> {
        let bytes = self.node.write(encode_request(&request)).await.map_err(write_error)?;
        decode_response(&bytes).map_err(|error| {
            Status::internal(format!("undecodable answer from the state machine: {error}"))
        })
    }
}
