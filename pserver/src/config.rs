//! `PServerConfig`: the flags of `raftrain pserver`. The doc comments are the `--help` text;
//! defaults are named constants; `validate` checks the rules between fields.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use platform::security::SecurityFiles;

use crate::layout::SLOT_COUNT_MAX;

pub const LISTEN_DEFAULT: &str = "127.0.0.1:7101";
pub const CHECKPOINT_INTERVAL_S_DEFAULT: u64 = 60;
/// The longest checkpoint interval: a replacement loses at most this much training.
pub const CHECKPOINT_INTERVAL_S_MAX: u64 = 24 * 3600;

#[derive(Debug, Clone, Args)]
pub struct PServerConfig {
    /// Master addresses (any subset of the group), comma-separated.
    #[arg(long, env = "RAFTRAIN_MASTERS", value_delimiter = ',', required = true)]
    pub masters: Vec<String>,
    /// Address to serve the pserver service on (host:port).
    #[arg(long, env = "RAFTRAIN_LISTEN", default_value = LISTEN_DEFAULT)]
    pub listen: SocketAddr,
    /// The address trainers reach this pserver at, registered with the master (host:port).
    /// Default: the bound --listen address.
    #[arg(long, env = "RAFTRAIN_ADVERTISE")]
    pub advertise: Option<String>,
    /// Directory for this pserver's checkpoint files. A replacement must be able to read the
    /// files of the pserver it replaces: give every pserver of a job the same directory on a
    /// shared volume (file names carry the slot and generation, so they never collide).
    #[arg(long, env = "RAFTRAIN_CHECKPOINT_DIR")]
    pub checkpoint_dir: PathBuf,
    /// The job's number of pserver slots (the seeds' /ps_desired): the same on every pserver
    /// and the layout every trainer uses. This pserver claims the lowest free slot below it,
    /// or waits until one frees.
    #[arg(long, env = "RAFTRAIN_NUM_PSERVERS")]
    pub num_pservers: u32,
    /// The job whose model this pserver serves (a job of the masters' group, submitted with
    /// `raftrain job submit` or by a trainer's dataset report; the pserver waits until it
    /// exists). Empty: the group's only job.
    #[arg(long, env = "RAFTRAIN_JOB", default_value = "")]
    pub job: String,
    /// Seconds between checkpoints (values, optimizer state and step; recorded through the
    /// master). A replacement resumes from the newest one: this is the most training a pserver
    /// death can lose.
    #[arg(long, env = "RAFTRAIN_CHECKPOINT_INTERVAL_S", default_value_t = CHECKPOINT_INTERVAL_S_DEFAULT)]
    pub checkpoint_interval_s: u64,
    /// Serve Prometheus metrics on `GET /metrics` at this address (host:port). Off when not
    /// given.
    #[arg(long, env = "RAFTRAIN_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    #[command(flatten)]
    pub security: SecurityFiles,
    #[command(flatten)]
    pub port_limits: platform::PortLimits,
}

impl PServerConfig {
    /// The rules between fields, checked before anything is bound or claimed.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.port_limits.validate(crate::limits::MESSAGE_BYTES_MAX)?;
        if !self.job.is_empty() {
            // A name no submit admits would be waited for for ever.
            client::check_job_name(&self.job).map_err(|error| anyhow::anyhow!("--job: {error}"))?;
        }
        anyhow::ensure!(!self.masters.is_empty(), "--masters is empty");
        anyhow::ensure!(
            (1..=SLOT_COUNT_MAX).contains(&self.num_pservers),
            "--num-pservers {} is outside 1..={SLOT_COUNT_MAX}",
            self.num_pservers
        );
        anyhow::ensure!(
            (1..=CHECKPOINT_INTERVAL_S_MAX).contains(&self.checkpoint_interval_s),
            "--checkpoint-interval-s {} is outside 1..={CHECKPOINT_INTERVAL_S_MAX}",
            self.checkpoint_interval_s
        );
        Ok(())
    }

    pub fn checkpoint_interval(&self) -> Duration {
        Duration::from_secs(self.checkpoint_interval_s)
    }
}
