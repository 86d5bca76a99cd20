//! `Proposer`: how the service and the leader's duties put a command into the log, stamped
//! with the leader clock, the client's stamp, and for leader decisions the term they were
//! computed in.

use super::status_mapping::write_error;
use crate::clock::Clock;
use crate::leader::{LevelWait, LevelsHeard};
use crate::leader_clock::LeaderClock;
use crate::replicated_state::ReplicatedState;
use crate::state::{
    decode_response, encode_request, ClientStamp, Command, Request, Response, BASE_FEATURE_LEVEL,
};
use consensus::ConsensusNode;
use std::sync::Arc;
use tonic::Status;

#[derive(Clone)]
pub(crate) struct Proposer {
    node: ConsensusNode<ReplicatedState>,
    clock: Arc<LeaderClock>,
    /// What the leader last heard of its members' feature levels (`leader/level_raise.rs`).
    levels: Arc<LevelsHeard>,
}

impl Proposer {
    pub(crate) fn new(node: ConsensusNode<ReplicatedState>, clock: Arc<dyn Clock>) -> Self {
        Self { node, clock: Arc::new(LeaderClock::new(clock)), levels: Arc::default() }
    }

    /// What the leader last heard of its members' feature levels.
    pub(crate) fn levels_heard(&self) -> Arc<LevelsHeard> {
        self.levels.clone()
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
        self.propose_together(client, command, 1).await
    }

    /// [`Proposer::propose`] of one of `together` commands a client sent at once, each in a
    /// call of its own: they share a log entry where they arrive within a moment
    /// (`ConsensusNode::write_together`).
    pub(crate) async fn propose_together(
        &self,
        client: Option<ClientStamp>,
        command: Command,
        together: usize,
    ) -> Result<Response, Status> {
        let request = Request { client, now_ms: self.now_ms(), term: None, command };
        self.replicate(request, together).await
    }

    /// Replicates a leader decision justified by this node's soft state in `term`: it takes
    /// effect only if committed in that same term.
    pub(crate) async fn decide(&self, term: u64, command: Command) -> Result<Response, Status> {
        let request = Request { client: None, now_ms: self.now_ms(), term: Some(term), command };
        self.replicate(request, 1).await
    }

    async fn replicate(&self, request: Request, together: usize) -> Result<Response, Status> {
        self.admit_level(&request.command)?;
        let bytes = encode_request(&request);
        let bytes = self.node.write_together(bytes, together).await.map_err(write_error)?;
        decode_response(&bytes).map_err(|error| {
            Status::internal(format!("undecodable answer from the state machine: {error}"))
        })
    }

    /// Whether the group's feature level covers `command` (a member may not decode it else).
    /// Followers leave the judgement to the leader their write is sent to; a leader's applied
    /// level may lag the committed one, never lead it, so what it admits every member decodes.
    /// A raise is admitted as it is: the leader proposes it having heard every member say it
    /// decodes the new level.
    pub(crate) fn admits(&self, command: &Command) -> bool {
        let needed = command.feature_level();
        needed <= BASE_FEATURE_LEVEL
            || matches!(command, Command::RaiseFeatureLevel { .. })
            || !self.node.is_leader()
            || needed <= self.node.read(|state| state.state().feature_level())
    }

    /// Refuses a command the group's feature level does not cover yet: `UNAVAILABLE` (retried)
    /// while the leader waits to hear every member or raises the level, `FAILED_PRECONDITION`
    /// when a member runs an older build.
    fn admit_level(&self, command: &Command) -> Result<(), Status> {
        if self.admits(command) {
            return Ok(());
        }
        let needed = command.feature_level();
        let group = self.node.read(|state| state.state().feature_level());
        match self.levels.wait_for(self.node.term(), needed) {
            LevelWait::Raising => Err(Status::unavailable(format!(
                "the group is raising its feature level from {group} to {needed}; try again"
            ))),
            LevelWait::Unheard => Err(Status::unavailable(format!(
                "this request needs feature level {needed}; the group runs level {group} until \
                 the leader hears every member decode it (is a master down?); try again"
            ))),
            LevelWait::OlderMember { lowest } => Err(Status::failed_precondition(format!(
                "this request needs feature level {needed} and a member decodes only level \
                 {lowest} (an older build, or held with --feature-level): upgrade every master \
                 (`raftrain status` lists each one's level)"
            ))),
        }
    }
}
