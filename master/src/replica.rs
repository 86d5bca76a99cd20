//! `Replica`: the master's parts on one consensus node, started and stopped together: the
//! proposer with its leader clock, the leader's duties and their loop, and the master service.
//! `run` serves it on a port; the simulation calls the same service in process.

use crate::clock::Clock;
use crate::config::MasterConfig;
use crate::dataset_scan::DataRoot;
use crate::leader::{run_duties, LeaderDuties};
use crate::replicated_state::ReplicatedState;
use crate::service::{MasterRpc, Proposer};
use anyhow::Context as _;
use consensus::ConsensusNode;
use proto::master::master_service_server::MasterServiceServer;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The largest message the master service accepts or sends.
const MESSAGE_BYTES_MAX: usize = 64 << 20;

/// One master replica's service and duties.
pub struct Replica {
    service: MasterServiceServer<MasterRpc>,
    stop: watch::Sender<bool>,
    duty_loop: JoinHandle<()>,
}

impl Replica {
    /// Starts the duties on `node` with `config`'s leases, queue policy and data root, timed
    /// by `clock`.
    pub fn start(
        node: ConsensusNode<ReplicatedState>,
        config: &MasterConfig,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        let data_root = open_data_root(config)?;
        let duties =
            LeaderDuties::new(clock.clone(), config.trainer_lease(), config.pserver_lease());
        let duties = Arc::new(duties);
        let proposer = Proposer::new(node, clock);
        let rpc = MasterRpc::new(proposer.clone(), duties.clone(), config.policy(), data_root);
        let service = MasterServiceServer::new(rpc)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX);
        let (stop, stopped) = watch::channel(false);
        let duty_loop = tokio::spawn(run_duties(proposer, duties, stopped));
        Ok(Self { service, stop, duty_loop })
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
