//! `raftrain pserver`: one parameter server, serving its slot until SIGINT or SIGTERM (after a
//! last checkpoint) or until it loses the slot (exit status 3, `exit_code::LOST_SLOT`).

use anyhow::Context as _;
use clap::Args;
use pserver::PServerConfig;

use crate::exit_code::Configuration;
use crate::runtime_args::RuntimeArgs;

#[derive(Debug, Args)]
pub(crate) struct PServerArgs {
    #[command(flatten)]
    config: PServerConfig,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl PServerArgs {
    /// The address the pserver registers (`--advertise`, else `--listen`), its name in the
    /// logs: its slot is known only once claimed, and the masters know its holder by address.
    pub(crate) fn id(&self) -> String {
        self.config.advertise.clone().unwrap_or_else(|| self.config.listen.to_string())
    }
}

pub(crate) fn run(args: PServerArgs) -> anyhow::Result<()> {
    args.config.validate().context(Configuration)?;
    let runtime = args.runtime.build()?;
    let shutdown = crate::shutdown::server_shutdown(&runtime);
    crate::runtime_args::serve(&runtime, async move {
        let listener = tokio::net::TcpListener::bind(args.config.listen)
            .await
            .with_context(|| format!("bind --listen {}", args.config.listen))?;
        pserver::run(args.config, listener, shutdown).await
    })
}
