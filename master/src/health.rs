//! The master's `grpc.health.v1` statuses: the master service is SERVING while this replica
//! knows a leader (it answers, or redirects to the leader) and NOT_SERVING while it knows none
//! or is stopping; the Raft service, where this port carries it, is SERVING while the port
//! serves. The statuses follow the node's Raft server metrics as they change, never a poll.

use consensus::{ConsensusNode, ServerMetrics};
use platform::GrpcHealth;
use proto::master::master_service_server::MasterServiceServer;
use tokio::sync::watch;
use tonic::server::NamedService;

use crate::replicated_state::ReplicatedState;
use crate::service::MasterRpc;

/// The master service's full name, as health and reflection know it.
pub(crate) const MASTER_SERVICE: &str = <MasterServiceServer<MasterRpc> as NamedService>::NAME;

/// The services the client port serves: the master's, and Raft's unless it has a port of its
/// own (`--peer-listen`).
pub(crate) fn client_port_services(raft_on_its_own_port: bool) -> Vec<&'static str> {
    match raft_on_its_own_port {
        true => vec![MASTER_SERVICE],
        false => vec![MASTER_SERVICE, consensus::RAFT_SERVICE],
    }
}

/// The statuses at start: no leader known yet, Raft served if it is on this port.
pub(crate) async fn initial(raft_on_its_own_port: bool) -> GrpcHealth {
    let health = GrpcHealth::default();
    health.set(MASTER_SERVICE, false).await;
    if !raft_on_its_own_port {
        health.set(consensus::RAFT_SERVICE, true).await;
    }
    health
}

/// Keeps the master service's status current: at each change of the node's server metrics,
/// SERVING when a leader is known; NOT_SERVING for good once `stopped` turns true.
pub(crate) fn spawn_keeper(
    node: &ConsensusNode<ReplicatedState>,
    health: GrpcHealth,
    stopped: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(keep(node.server_metrics(), health, stopped))
}

async fn keep(
    mut metrics: watch::Receiver<ServerMetrics>,
    health: GrpcHealth,
    mut stopped: watch::Receiver<bool>,
) {
    let mut serving = None;
    loop {
        let leader_known = metrics.borrow_and_update().current_leader.is_some();
        if serving != Some(leader_known) {
            tracing::debug!(serving = leader_known, "master service health");
            health.set(MASTER_SERVICE, leader_known).await;
            serving = Some(leader_known);
        }
        tokio::select! {
            changed = metrics.changed() => if changed.is_err() { break },
            _ = stopped.wait_for(|stop| *stop) => break,
        }
    }
    health.set(MASTER_SERVICE, false).await;
}
