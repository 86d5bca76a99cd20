//! `WatchPServers`: the pserver table now and after every change, streamed to trainers (the
//! seeds' "broadcast pserver changes"). The stream ends with `UNAVAILABLE` as soon as this node
//! cannot confirm that a quorum still follows it (checked at every change and at least every
//! `leadership_fresh_for`), so the watcher reconnects to the current leader: a deposed, paused
//! or cut-off leader, or one handing off before a stop, never keeps a watcher on a stale table.

use super::status_mapping::write_error;
use crate::replicated_state::ReplicatedState;
use crate::state::Response;
use consensus::ConsensusNode;
use proto::master as pb;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

/// Tables a slow watcher may fall behind by before the sender waits for it.
const WATCH_BUFFER_COUNT: usize = 16;

pub(crate) type PServerStream = ReceiverStream<Result<pb::ListPServersReply, Status>>;

/// The current pserver table of job `job_id` in the applied state (empty before the job exists and
/// once it is gone).
pub(crate) fn pserver_table(state: &ReplicatedState, job_id: Option<u64>) -> pb::ListPServersReply {
    let (desired, slots) = job_id.map(|job_id| state.pserver_slots(job_id)).unwrap_or_default();
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

/// The incarnation of job `job` a watcher named, as the applied state resolves it now:
/// `Ok(None)` while no job exists yet (pservers and trainers may start first), the client's
/// error otherwise.
pub(crate) fn watched_job(state: &ReplicatedState, job: &str) -> Result<Option<u64>, Status> {
    match state.state().job_id(job) {
        Ok(job_id) => Ok(Some(job_id)),
        Err(Response::NoDataset) => Ok(None),
        Err(response) => Err(super::status_mapping::unexpected("WatchPServers", response)),
    }
}

pub(crate) fn watch_pservers(node: ConsensusNode<ReplicatedState>, job: String) -> PServerStream {
    let (sender, receiver) = tokio::sync::mpsc::channel(WATCH_BUFFER_COUNT);
    tokio::spawn(async move {
        let mut metrics = node.metrics();
        let mut last_sent = None;
        loop {
            if let Err(error) = node.confirm_leadership().await {
                let _ = sender.send(Err(write_error(error))).await;
                return;
            }
            // Every applied entry wakes this loop; the table is rebuilt only when a holder
            // changed (an O(1) check), not on every task transition.
            // The job is resolved afresh each time: it may be submitted after the watch began.
            let job_id = match node.read(|state| watched_job(state, &job)) {
                Ok(job_id) => job_id,
                Err(status) => {
                    let _ = sender.send(Err(status)).await;
                    return;
                }
            };
            let version = node.read(|state| {
                (job_id, job_id.and_then(|job_id| state.pserver_table_version(job_id)))
            });
            if last_sent != Some(version) {
                let table = node.read(|state| pserver_table(state, job_id));
                if sender.send(Ok(table)).await.is_err() {
                    return;
                }
                last_sent = Some(version);
            }
            // Metrics change whenever an entry is applied or leadership moves; the timer makes
            // a leader that hears nothing (paused, cut off) check its leadership again.
            tokio::select! {
                biased;
                changed = metrics.changed() => if changed.is_err() { return },
                () = sender.closed() => return,
                () = tokio::time::sleep(node.leadership_fresh_for()) => {}
            }
        }
    });
    ReceiverStream::new(receiver)
}
