//! `MasterConfig`: the flags of `raftrain master`. The doc comments are the `--help` text;
//! defaults are named constants; `validate` checks the rules between fields.

use crate::state::QueuePolicy;
use anyhow::Context as _;
use clap::Args;
use platform::security::SecurityFiles;

use consensus::{parse_peers, NodeConfig};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// openraft 0.9 lets a follower that knew a leader start an election only after the leader's
/// lease (`election_timeout_max`) plus a random election timeout: with these defaults a new
/// election begins 310 to 400 ms after the last heartbeat (6 to 8 heartbeats missed), so a
/// kill -9 of the leader is followed by an election 260-400 ms later, below etcd's 1 s.
/// (150-300 ms meant 450-600 ms; 500-1000 ms would mean 1.5-2 s, measured by `bench master`.)
pub const ELECTION_TIMEOUT_MIN_MS_DEFAULT: u64 = 110;
/// Also each AppendEntries RPC's timeout in openraft 0.9: far above a flush plus a round trip
/// on this project's machines (an fsync of 0.1-0.3 ms, `bench consensus`), with room for load.
pub const HEARTBEAT_MS_DEFAULT: u64 = 50;
/// See [`ELECTION_TIMEOUT_MIN_MS_DEFAULT`]: also the leader lease, during which followers
/// refuse to vote for anyone else.
pub const ELECTION_TIMEOUT_MAX_MS_DEFAULT: u64 = 200;
/// Snapshot (and purge the log) after this many entries. A snapshot encodes the whole state,
/// which grows with the dataset, so it is taken less often than the consensus default.
pub const SNAPSHOT_LOGS_SINCE_LAST_DEFAULT: u64 = 50_000;
/// Entries kept in the log behind a snapshot: the consensus default.
pub const SNAPSHOT_LOGS_KEPT_DEFAULT: u64 = consensus::config::MAX_IN_SNAPSHOT_LOG_TO_KEEP_DEFAULT;
pub const CHUNKS_PER_TASK_DEFAULT: u32 = 1;
pub const TASK_TIMEOUT_MIN_MS_DEFAULT: u64 = 20_000;
pub const TIMEOUT_FACTOR_DEFAULT: u32 = 3;
pub const MAX_TASK_FAILURES_DEFAULT: u32 = 3;
pub const TRAINER_LEASE_MS_DEFAULT: u64 = 5_000;
pub const PSERVER_LEASE_MS_DEFAULT: u64 = 5_000;
/// A day: time to read a finished job's status and evaluations, short enough that the group's
/// job limit is not filled by old jobs.
pub const JOB_RETENTION_SECS_DEFAULT: u64 = 24 * 60 * 60;
/// A day: how long a torchrun rendezvous run nobody writes to is kept.
pub const RENDEZVOUS_IDLE_SECS_DEFAULT: u64 = 24 * 60 * 60;
/// A running job nobody touches for this long is cancelled: a day.
pub const JOB_IDLE_EXPIRY_MS_DEFAULT: u64 = 24 * 60 * 60 * 1000;

#[derive(Debug, Clone, Args)]
pub struct MasterConfig {
    /// This master's id: its entry in --peers.
    #[arg(long, env = "RAFTRAIN_ID")]
    pub id: u64,
    /// Address to serve the Raft and master services on (host:port).
    #[arg(long, env = "RAFTRAIN_LISTEN")]
    pub listen: SocketAddr,
    /// Every founding master of the group as id=host:port, comma-separated, the same on every
    /// master. It seeds a new group and must stay the same on later starts; members added
    /// since (`raftrain member add`, --join) come from the replicated membership.
    #[arg(long, env = "RAFTRAIN_PEERS", required_unless_present = "join", conflicts_with = "join")]
    pub peers: Option<String>,
    /// Instead of --peers: join a running group by asking any of these masters (host:port,
    /// comma-separated) to add this one as a learner and then promote it once it caught up.
    /// Keep the same flag on later starts (a member already in the group asks nothing).
    #[arg(long, env = "RAFTRAIN_JOIN", value_delimiter = ',')]
    pub join: Option<Vec<String>>,
    /// With --join: the address (host:port) other masters and clients reach this one at; the
    /// default is --listen, which must then not be a wildcard address such as 0.0.0.0.
    #[arg(long, env = "RAFTRAIN_ADVERTISE", requires = "join")]
    pub advertise: Option<String>,
    /// With --join: a member that follows its process, as a scaled StatefulSet's pod does. On a
    /// planned stop (SIGTERM) it asks the group to remove it (after handing leadership off),
    /// so a scale-down leaves no dead voter behind; started again on a directory whose master
    /// left or was removed, it clears that directory and joins anew.
    #[arg(long, env = "RAFTRAIN_LEAVE_ON_STOP", requires = "join")]
    pub leave_on_stop: bool,
    /// Directory for the Raft log (sled) and snapshot files; reopened on restart.
    #[arg(long, env = "RAFTRAIN_DATA_DIR")]
    pub data_dir: PathBuf,
    /// Serve Prometheus metrics (Raft and job gauges) on `GET /metrics` at this address
    /// (host:port; port 0 picks a free one, logged at start). Off when not given.
    #[arg(long, env = "RAFTRAIN_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    /// Serve no dashboard at `/` on --metrics-listen (the page and its JSON show job names,
    /// trainer names and failure reasons to whoever reaches that port).
    #[arg(long, env = "RAFTRAIN_NO_DASHBOARD")]
    pub no_dashboard: bool,
    /// Read reported datasets only under this directory: every pattern (a relative one is
    /// taken relative to it) and every file it names must lie under it once `..` and symbolic
    /// links are resolved, or the report is refused without the file being opened. Without
    /// it, a client may make the leader read any file the master can read.
    #[arg(long, env = "RAFTRAIN_DATA_ROOT")]
    pub data_root: Option<PathBuf>,
    /// Serve Raft traffic between masters on this address (host:port) instead of --listen,
    /// so it can be firewalled apart from clients' (like etcd's peer URLs); needs
    /// --peer-addrs. Without it, one port serves both.
    #[arg(long, env = "RAFTRAIN_PEER_LISTEN", requires = "peer_addrs")]
    pub peer_listen: Option<SocketAddr>,
    /// With --peer-listen: every master's Raft address as id=host:port, comma-separated, the
    /// same on every master; --peers then lists the addresses clients reach. A member added
    /// later (`member add`, --join) must be listed here on every master first.
    #[arg(long, env = "RAFTRAIN_PEER_ADDRS", requires = "peer_listen")]
    pub peer_addrs: Option<String>,
    #[command(flatten)]
    pub security: SecurityFiles,
    #[command(flatten)]
    pub port_limits: platform::PortLimits,
    /// Raft heartbeat interval; also each AppendEntries RPC's timeout, so it must exceed a
    /// follower's fsync plus a round trip: raise it (with the election timeouts) on disks whose
    /// fsync takes more than a few milliseconds.
    #[arg(long, env = "RAFTRAIN_HEARTBEAT_MS", default_value_t = HEARTBEAT_MS_DEFAULT)]
    pub heartbeat_ms: u64,
    /// Lower bound of the randomized election timeout. After a leader was known, an election
    /// starts only after the leader lease (the upper bound) plus this random timeout.
    #[arg(long, env = "RAFTRAIN_ELECTION_TIMEOUT_MIN_MS", default_value_t = ELECTION_TIMEOUT_MIN_MS_DEFAULT)]
    pub election_timeout_min_ms: u64,
    /// Upper bound of the randomized election timeout.
    #[arg(long, env = "RAFTRAIN_ELECTION_TIMEOUT_MAX_MS", default_value_t = ELECTION_TIMEOUT_MAX_MS_DEFAULT)]
    pub election_timeout_max_ms: u64,
    /// Take a snapshot (and purge the log) after this many applied entries.
    #[arg(long, env = "RAFTRAIN_SNAPSHOT_LOGS_SINCE_LAST", default_value_t = SNAPSHOT_LOGS_SINCE_LAST_DEFAULT)]
    pub snapshot_logs_since_last: u64,
    /// Entries already in a snapshot that stay in the log, so a replica slightly behind
    /// catches up from the log instead of a whole snapshot (0: every laggard gets a snapshot).
    #[arg(long, env = "RAFTRAIN_SNAPSHOT_LOGS_KEPT", default_value_t = SNAPSHOT_LOGS_KEPT_DEFAULT)]
    pub snapshot_logs_kept: u64,
    /// Consecutive RecordIO chunks per task.
    #[arg(long, env = "RAFTRAIN_CHUNKS_PER_TASK", default_value_t = CHUNKS_PER_TASK_DEFAULT)]
    pub chunks_per_task: u32,
    /// No task times out sooner than this after it was handed out.
    #[arg(long, env = "RAFTRAIN_TASK_TIMEOUT_MIN_MS", default_value_t = TASK_TIMEOUT_MIN_MS_DEFAULT)]
    pub task_timeout_min_ms: u64,
    /// A task times out after max(--task-timeout-min-ms, this x the average task time).
    #[arg(long, env = "RAFTRAIN_TIMEOUT_FACTOR", default_value_t = TIMEOUT_FACTOR_DEFAULT)]
    pub timeout_factor: u32,
    /// A task that failed or timed out more than this many times in a pass moves to `failed`.
    #[arg(long, env = "RAFTRAIN_MAX_TASK_FAILURES", default_value_t = MAX_TASK_FAILURES_DEFAULT)]
    pub max_task_failures: u32,
    /// Give failed tasks another try in the next pass.
    #[arg(long, env = "RAFTRAIN_RETRY_FAILED_NEXT_PASS")]
    pub retry_failed_next_pass: bool,
    /// A trainer that sends no heartbeat for this long is declared lost and its tasks requeued.
    #[arg(long, env = "RAFTRAIN_TRAINER_LEASE_MS", default_value_t = TRAINER_LEASE_MS_DEFAULT)]
    pub trainer_lease_ms: u64,
    /// A pserver that sends no heartbeat for this long loses its slot.
    #[arg(long, env = "RAFTRAIN_PSERVER_LEASE_MS", default_value_t = PSERVER_LEASE_MS_DEFAULT)]
    pub pserver_lease_ms: u64,
    /// Keep a finished or cancelled job (its status, evaluations and progress checkpoints) for
    /// this long, then remove it so the group's state stays bounded.
    #[arg(long, env = "RAFTRAIN_JOB_RETENTION_SECS", default_value_t = JOB_RETENTION_SECS_DEFAULT)]
    pub job_retention_secs: u64,
    /// Remove a torchrun rendezvous run (its state and store keys) nobody wrote to for this
    /// long. Agents of a live run write every few seconds (torch's keep-alive heartbeats).
    #[arg(long, env = "RAFTRAIN_RENDEZVOUS_IDLE_SECS", default_value_t = RENDEZVOUS_IDLE_SECS_DEFAULT)]
    pub rendezvous_idle_secs: u64,
    /// Cancel a running job that nobody touched for this long: no heartbeat of its trainers
    /// or pservers and no call that writes to it (reports, task calls, progress,
    /// registrations, claims, evaluations; reads such as status do not count). Counted by the
    /// leader, afresh after a failover. 0 turns it off; else at least both leases.
    #[arg(long, env = "RAFTRAIN_JOB_IDLE_EXPIRY_MS", default_value_t = JOB_IDLE_EXPIRY_MS_DEFAULT)]
    pub job_idle_expiry_ms: u64,
    /// The newest feature level this master admits: 1 up to its build's own (the default).
    /// Every master of a group held at the level its older build had keeps the group there
    /// after their binaries are upgraded, so they can still go back to that build; lift the
    /// hold to let the group use what the newer build adds. A master whose group already runs a
    /// higher level refuses to start (a group's level never goes down).
    #[arg(long, env = "RAFTRAIN_FEATURE_LEVEL", default_value_t = crate::state::FEATURE_LEVEL)]
    pub feature_level: u32,
}

impl MasterConfig {
    /// The consensus node's configuration; checks the peers and timings.
    pub fn node_config(&self) -> anyhow::Result<NodeConfig> {
        let mut node =
            NodeConfig::new(self.id, self.listen, self.seed_peers()?, self.data_dir.clone());
        node.joins = self.join.is_some();
        node.heartbeat_ms = self.heartbeat_ms;
        node.election_timeout_min_ms = self.election_timeout_min_ms;
        node.election_timeout_max_ms = self.election_timeout_max_ms;
        node.snapshot_logs_since_last = self.snapshot_logs_since_last;
        node.max_in_snapshot_log_to_keep = self.snapshot_logs_kept;
        node.feature_level = self.feature_level;
        if let Some(addrs) = &self.peer_addrs {
            node.raft_addrs = parse_peers(addrs).context("--peer-addrs")?;
        }
        node.validate().context("--id, --listen, --peers, --peer-addrs and the timing flags")?;
        Ok(node)
    }

    /// What the data directory is seeded with: --peers, or with --join this master alone at
    /// its advertised address.
    pub fn seed_peers(&self) -> anyhow::Result<std::collections::BTreeMap<u64, String>> {
        match (&self.peers, &self.join) {
            (Some(peers), _) => parse_peers(peers).context("--peers"),
            (None, Some(join)) => {
                anyhow::ensure!(!join.is_empty(), "--join names no master: give host:port,...");
                for addr in join {
                    client::check_master_addr(addr)
                        .map_err(|error| anyhow::anyhow!("--join {addr:?} {error}"))?;
                }
                Ok(std::collections::BTreeMap::from([(self.id, self.advertised()?)]))
            }
            (None, None) => anyhow::bail!("give --peers (a new group) or --join (a running one)"),
        }
    }

    /// The address this master is reached at: --advertise, else --listen when it names a host.
    pub fn advertised(&self) -> anyhow::Result<String> {
        if let Some(addr) = &self.advertise {
            client::check_master_addr(addr)
                .map_err(|error| anyhow::anyhow!("--advertise {addr:?} {error}"))?;
            return Ok(addr.clone());
        }
        anyhow::ensure!(
            !self.listen.ip().is_unspecified(),
            "--listen {} is a wildcard address that others cannot dial: give --advertise \
             host:port",
            self.listen
        );
        Ok(self.listen.to_string())
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        self.port_limits.validate(platform::MESSAGE_BYTES_MAX)?;
        let chunks_per_task_max = crate::state::CHUNKS_PER_TASK_MAX;
        anyhow::ensure!(
            (1..=chunks_per_task_max).contains(&self.chunks_per_task),
            "--chunks-per-task must be 1 to {chunks_per_task_max} (a task's chunks travel in one reply)"
        );
        anyhow::ensure!(self.timeout_factor >= 1, "--timeout-factor must be at least 1");
        // The job defaults: every job that overrides nothing runs with them.
        let policy = client::PolicyOverrides {
            chunks_per_task: Some(self.chunks_per_task),
            task_timeout_min_ms: Some(self.task_timeout_min_ms),
            timeout_factor: Some(self.timeout_factor),
            max_task_failures: Some(self.max_task_failures),
            retry_failed_next_pass: Some(self.retry_failed_next_pass),
        };
        client::check_policy(&policy).map_err(|message| anyhow::anyhow!("--{message}"))?;
        anyhow::ensure!(self.trainer_lease_ms >= 100, "--trainer-lease-ms must be at least 100");
        anyhow::ensure!(self.pserver_lease_ms >= 100, "--pserver-lease-ms must be at least 100");
        anyhow::ensure!(
            self.rendezvous_idle_secs >= 60,
            "--rendezvous-idle-secs must be at least 60 (torch's agents write every few seconds, \
             but a run waiting for its nodes may be quiet for a minute)"
        );
        let newest = crate::state::FEATURE_LEVEL;
        anyhow::ensure!(
            (1..=newest).contains(&self.feature_level),
            "--feature-level must be 1 to {newest} (the newest this build decodes)"
        );
        let lease_ms = self.trainer_lease_ms.max(self.pserver_lease_ms);
        anyhow::ensure!(
            self.job_idle_expiry_ms == 0 || self.job_idle_expiry_ms >= lease_ms,
            "--job-idle-expiry-ms must be 0 (off) or at least the longer of --trainer-lease-ms \
             and --pserver-lease-ms ({lease_ms}): a shorter one would cancel a job between two \
             heartbeats of its live members"
        );
        self.node_config().map(|_| ())
    }

    pub(crate) fn policy(&self) -> QueuePolicy {
        QueuePolicy {
            chunks_per_task: self.chunks_per_task,
            task_timeout_min_ms: self.task_timeout_min_ms,
            timeout_factor: self.timeout_factor,
            max_task_failures: self.max_task_failures,
            retry_failed_next_pass: self.retry_failed_next_pass,
        }
    }

    pub(crate) fn trainer_lease(&self) -> Duration {
        Duration::from_millis(self.trainer_lease_ms)
    }

    pub(crate) fn pserver_lease(&self) -> Duration {
        Duration::from_millis(self.pserver_lease_ms)
    }

    pub(crate) fn job_retention(&self) -> Duration {
        Duration::from_secs(self.job_retention_secs)
    }

    pub(crate) fn rendezvous_idle(&self) -> Duration {
        Duration::from_secs(self.rendezvous_idle_secs)
    }

    /// How long a running job may go untouched; `None`: for ever.
    pub(crate) fn job_idle_expiry(&self) -> Option<Duration> {
        (self.job_idle_expiry_ms > 0).then(|| Duration::from_millis(self.job_idle_expiry_ms))
    }
}
