//! `raftrain master`: one replica of the master group, serving until SIGINT or SIGTERM.

use anyhow::Context as _;
use clap::Args;
use master::MasterConfig;

use crate::exit_code::Configuration;
use crate::runtime_args::RuntimeArgs;

#[derive(Debug, Args)]
pub(crate) struct MasterArgs {
    #[command(flatten)]
    config: MasterConfig,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl MasterArgs {
    /// The master's `--id`, its name in the logs.
    pub(crate) fn id(&self) -> String {
        self.config.id.to_string()
    }
}

pub(crate) fn run(args: MasterArgs) -> anyhow::Result<()> {
    args.config.validate().context(Configuration)?;
    let runtime = args.runtime.build()?;
    // The SIGTERM handler first: anyone who can connect may also signal.
    let shutdown = crate::shutdown::server_shutdown(&runtime);
    crate::runtime_args::serve(&runtime, async move {
        let listener = tokio::net::TcpListener::bind(args.config.listen)
            .await
            .with_context(|| format!("bind --listen {}", args.config.listen))?;
        master::run(args.config, listener, shutdown).await
    })
}
