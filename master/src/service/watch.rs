//! `WatchPServers`: the pserver table now and after every change, streamed to trainers (the
//! seeds' "broadcast pserver changes"). The stream ends with `UNAVAILABLE` when this node stops
//! leading, so the watcher reconnects to the new leader.

use super::status_mapping::not_leader;
use crate::replicated_state::ReplicatedState;
use consensus::ConsensusNode;
use proto::master as pb;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

/// Tables a slow watcher may fall behind by before the sender waits for it.
const WATCH_BUFFER_COUNT: usize = 16;

pub(crate) type PServerStream = ReceiverStream<Result<pb::ListPServersReply, Status>>;

/// The current pserver table of the applied state.
pub(crate) fn pserver_table(state: &ReplicatedState) -> pb::ListPServersReply {
    let (desired, slots) = state.pserver_slots();
    let pservers = slots
        .into_iter()
        .map(|(index, holder)| pb::PServer {
            index,
            addr: holder.addr,
            generation: holder.generation,
            // The table follows holders; checkpoints are in Status.
            ..pb::PServer::default()
        })
        .collect();
    pb::ListPServersReply { desired, pservers }
}

pub(crate) fn watch_pservers(node: ConsensusNode<ReplicatedState>) -> PServerStream {
    let (sender, receiver) = tokio::sync::mpsc::channel(WATCH_BUFFER_COUNT);
    tokio::spawn(async move {
        let mut metrics = node.metrics();
        let mut last_sent = None;
        loop {
            if !node.is_leader() {
                let _ = sender.send(Err(not_leader(None))).await;
                return;
            }
            // Every applied entry wakes this loop; the table is rebuilt only when a holder
            // changed (an O(1) check), not on every task transition.
            let version = node.read(ReplicatedState::pserver_table_version);
            if last_sent != Some(version) {
                let table = node.read(pserver_table);
                if sender.send(Ok(table)).await.is_err() {
                    return;
                }
                last_sent = Some(version);
            }
            // Metrics change whenever an entry is applied or leadership moves.
            tokio::select! {
                biased;
                changed = metrics.changed() => if changed.is_err() { return },
                () = sender.closed() => return,
            }
        }
    });
    ReceiverStream::new(receiver)
}
