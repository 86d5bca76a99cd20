//! How a node's Raft core stops on its own: a failed flush of the log stops it
//! (`stop_on_failed_flush`), and `ConsensusNode::core_stopped` says why it stopped.

use crate::durable_log::DurableWatch;
use crate::{ConsensusNode, Raft, StateMachine};

impl<S: StateMachine> ConsensusNode<S> {
    /// Resolves once openraft's core has stopped on its own (a fatal error, or a panic), with
    /// why. It never does while the node runs; a server should then exit, so that whatever
    /// supervises it restarts it on its durable state (openraft 0.9.25 can stop a leader's
    /// core in a race: a replication stream that quit on a higher vote, then a snapshot sent
    /// to it).
    pub async fn core_stopped(&self) -> String {
        // The core owns the server metrics' sender, which changes only with the role: their
        // channel closes when the core ends. (The full metrics change at every turn of the
        // core, several times an entry: waiting on them would wake this task as often.)
        let mut server = self.inner.raft.server_metrics();
        while server.changed().await.is_ok() {}
        if let Some(reason) = self.inner.durable.failure_now() {
            return format!("a flush of the Raft log failed: {reason}");
        }
        match &self.inner.raft.metrics().borrow().running_state {
            Err(fatal) => fatal.to_string(),
            Ok(()) => "the Raft core stopped without a word (it panicked)".to_string(),
        }
    }
}

/// Stops the Raft core once a flush of its log failed. A follower's failed append already
/// stops it (openraft gets the error), but the leader's own entries were acknowledged before
/// their flush (`durable_log`): openraft would go on leading, every AppendEntries refused by
/// the durability gate, and never commit again. Stopped, the core reports it
/// (`ConsensusNode::core_stopped`), and the server exits for its supervisor to restart it on
/// what its disk holds.
pub(crate) async fn stop_on_failed_flush(durable: DurableWatch, raft: Raft) {
    let Some(reason) = durable.failure().await else { return };
    tracing::error!(%reason, "a flush of the Raft log failed: stopping the Raft core");
    if let Err(error) = raft.shutdown().await {
        tracing::error!(%error, "the Raft core did not stop cleanly");
    }
}
