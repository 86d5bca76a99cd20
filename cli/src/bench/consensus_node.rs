//! `bench consensus-node`: one member of the consensus benchmark's group, serving the Raft and
//! key-value services on one port. `bench consensus` starts three of these as child processes;
//! each exits when its stdin closes, so none outlives the benchmark.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use ::consensus::NodeConfig;
use anyhow::Context as _;
use clap::Args;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::runtime_args::RuntimeArgs;

#[derive(Debug, Args)]
pub struct ConsensusNodeArgs {
    /// This node's id; must be one of `--peers`.
    #[arg(long)]
    pub id: u64,
    /// Address the Raft and key-value services listen on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Every member of the group: `1=127.0.0.1:7001,2=127.0.0.1:7002,...`.
    #[arg(long)]
    pub peers: String,
    /// Holds this node's sled log and snapshot files.
    #[arg(long)]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub(crate) runtime: RuntimeArgs,
}

pub fn run(args: &ConsensusNodeArgs) -> anyhow::Result<()> {
    let peers = ::consensus::parse_peers(&args.peers).context("parse --peers")?;
    let config = NodeConfig::new(args.id, args.listen, peers, args.data_dir.clone());
    config.validate().context("validate the node configuration")?;
    let runtime = args.runtime.build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("bind {}", args.listen))?;
        let (stop, stopped) = oneshot::channel::<()>();
        // The parent holds our stdin; end of input means it is gone (or wants us gone).
        std::thread::spawn(move || {
            let mut buffer = [0u8; 64];
            while matches!(std::io::stdin().read(&mut buffer), Ok(count) if count > 0) {}
            let _ = stop.send(());
        });
        let shutdown = async {
            let _ = stopped.await;
        };
        super::kv::service::run_node(config, listener, shutdown).await
    })
}
