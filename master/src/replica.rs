//! `Replica`: the master's parts on one consensus node, started and stopped together: the
//! proposer with its leader clock, the leader's duties and their loop, and the master service.
//! `run` serves it on a port; the simulation calls the same service in process.

use crate::clock::Clock;
use crate::config::MasterConfig;
use crate::dataset_scan::{DataRoot, PATTERN_BYTES_MAX, PATTERN_COUNT_MAX};
use crate::leader::{run_duties, run_level_raise, LeaderDuties};
use crate::replicated_state::ReplicatedState;
use crate::service::{MasterRpc, Proposer};
use anyhow::Context as _;
use consensus::{ConsensusNode, MemberLevels};
use proto::master::master_service_server::MasterServiceServer;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The largest message the master service sends (a `Status` reply listing a large job).
const MESSAGE_BYTES_MAX: usize = 64 << 20;

/// Protobuf framing of one repeated string: its tag and a length varint (4096 takes two bytes).
const PATTERN_FRAMING_BYTES: usize = 8;
/// Room for every field of a request besides its patterns (stamp, job name, passes).
const REQUEST_FIELDS_BYTES: usize = 64 << 10;
/// The largest message the master service accepts: the largest legitimate request is a dataset
/// report of the most patterns, each the longest (about 4 MiB); a longer announced message is
/// refused before anything is reserved for it.
pub(crate) const REQUEST_MESSAGE_BYTES_MAX: usize =
    PATTERN_COUNT_MAX * (PATTERN_BYTES_MAX + PATTERN_FRAMING_BYTES) + REQUEST_FIELDS_BYTES;

/// One master replica's service and duties.
pub struct Replica {
    service: MasterServiceServer<MasterRpc>,
    stop: watch::Sender<bool>,
    duty_loop: JoinHandle<()>,
    level_loop: JoinHandle<()>,
}

impl Replica {
    /// Starts the duties on `node` with `config`'s leases, queue policy and data root, timed
    /// by `clock`; members say their feature levels over gRPC.
    pub fn start(
        node: ConsensusNode<ReplicatedState>,
        config: &MasterConfig,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        let levels = Arc::new(node.grpc_member_levels());
        Self::start_with_levels(node, config, clock, levels)
    }

    /// [`Replica::start`], with members asked their feature levels through `levels` (the
    /// simulation's transport).
    pub fn start_with_levels(
        node: ConsensusNode<ReplicatedState>,
        config: &MasterConfig,
        clock: Arc<dyn Clock>,
        levels: Arc<dyn MemberLevels>,
    ) -> anyhow::Result<Self> {
        let data_root = open_data_root(config)?;
        let duties = LeaderDuties::new(
            clock.clone(),
            config.trainer_lease(),
            config.pserver_lease(),
            config.job_retention(),
            config.rendezvous_idle(),
            config.job_idle_expiry(),
        );
        let duties = Arc::new(duties);
        let proposer = Proposer::new(node, clock);
        let rpc = MasterRpc::new(proposer.clone(), duties.clone(), config.policy(), data_root);
        let service = MasterServiceServer::new(rpc)
            .max_decoding_message_size(REQUEST_MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX);
        let (stop, stopped) = watch::channel(false);
        let heard = proposer.levels_heard();
        let level_loop =
            tokio::spawn(run_level_raise(proposer.clone(), levels, heard, stopped.clone()));
        let duty_loop = tokio::spawn(run_duties(proposer, duties, stopped));
        Ok(Self { service, stop, duty_loop, level_loop })
    }

    /// The master service, to serve or to call in process.
    pub fn service(&self) -> MasterServiceServer<MasterRpc> {
        self.service.clone()
    }

    /// Turns true when the replica stops: servers of its service stop with it.
    pub fn stopped(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }

    /// Stops the duties (and tells the servers to stop).
    pub async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        self.level_loop.await.context("the feature-level duty panicked")?;
        self.duty_loop.await.context("the leader duties panicked")
    }
}

/// The resolved `--data-root`; without one, warns once that any readable file may be reported.
fn open_data_root(config: &MasterConfig) -> anyhow::Result<Option<DataRoot>> {
    let Some(given) = &config.data_root else {
        tracing::warn!(
            "datasets are not confined: a client may make the leader read any file this \
             process can read; pass --data-root DIR to confine them"
        );
        return Ok(None);
    };
    let root = DataRoot::open(given)?;
    tracing::info!(data_root = %root.path().display(), "datasets are read only under --data-root");
    Ok(Some(root))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;
    use proto::master::{ClientStamp, ReportDatasetRequest};

    /// The largest dataset report the scan admits fits the service's message limit.
    #[test]
    fn largest_report_fits_the_request_limit() {
        let stamp = ClientStamp { client_id: u64::MAX, seq: u64::MAX };
        let request = ReportDatasetRequest {
            stamp: Some(stamp),
            job: "j".repeat(crate::state::JOB_NAME_BYTES_MAX),
            patterns: vec!["p".repeat(PATTERN_BYTES_MAX); PATTERN_COUNT_MAX],
            passes: u32::MAX,
            restart: true,
            shuffle_seed: Some(u64::MAX),
        };
        let encoded = request.encoded_len();
        assert!(encoded <= REQUEST_MESSAGE_BYTES_MAX, "{encoded} > {REQUEST_MESSAGE_BYTES_MAX}");
    }
}
