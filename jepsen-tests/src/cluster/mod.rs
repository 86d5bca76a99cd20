//! `Cluster`: three real masters whose Raft traffic runs through one [`LinkProxy`] per
//! ordered pair (so any partition can be cut), plus pservers, all supervised by one
//! [`ProcessGroup`] in a directory kept for the report.
//!
//! This file defines `Cluster` and starts it; its methods live by area beside it: `masters.rs`
//! (the masters' processes), `master_views.rs` (a client, the leader, a restarted master's
//! rejoin), `pservers.rs`, `trainers.rs`, `trainer_data.rs` (a trainer's data broken and
//! mended), `network.rs` (isolate, cut, clog, half-open, heal).

mod master_views;
mod masters;
mod network;
mod pservers;
mod trainer_data;
mod trainers;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::history::{History, OpKind, Operation, Value, SUPERVISOR_PROCESS};
use crate::netns::Namespaces;
use crate::proxy::LinkProxy;
use crate::supervisor::{free_loopback_addrs, ProcessGroup};

/// Masters in the group.
pub const MASTER_COUNT: usize = 3;
/// The masters' port in their own namespaces.
const MASTER_PORT: u16 = 7000;
/// A process sent SIGTERM must exit within this long; one that does not is killed, and the
/// history says it ignored SIGTERM (a bug: every orchestrator sends SIGTERM first).
pub const STOP_WAIT_MS_MAX: u64 = 10_000;
/// A restarted master must be back in the group (following a leader, its applied index at
/// the leader's) within this long.
pub const REJOIN_WAIT_MS_MAX: u64 = 60_000;

/// What the cluster is asked to run.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    pub pserver_slots: u32,
    /// Pservers started per job (more than the slots: the rest wait as standbys).
    pub pservers: usize,
    /// The jobs the pservers serve (`--job`), `pservers` each; empty: one set that names no
    /// job (the group's only one).
    pub jobs: Vec<String>,
    /// Flags given to every master (queue policy, leases).
    pub master_args: Vec<String>,
    /// Give each master a network namespace and cut links with routes (needs root) instead
    /// of running Raft through the TCP proxies.
    pub netns: bool,
}

pub struct Cluster {
    dir: PathBuf,
    binary: PathBuf,
    processes: ProcessGroup,
    /// The masters' client addresses, by index (id - 1).
    pub master_addrs: Vec<String>,
    /// The proxy master `from` dials master `to`'s Raft port through, by `(from, to)`.
    links: BTreeMap<(usize, usize), LinkProxy>,
    /// With `netns`, the masters' namespaces (then there are no proxies).
    namespaces: Option<Namespaces>,
    /// The process index of each master, then of each pserver.
    masters: Vec<usize>,
    pub pservers: Vec<usize>,
    pub pserver_addrs: Vec<String>,
    /// Each pserver's job (empty: the group's only job).
    pub pserver_jobs: Vec<String>,
    /// The process index of each trainer (training workload only).
    pub trainers: Vec<usize>,
    /// Each trainer's `--dataset`, the file a broken view replaces.
    trainer_datasets: Vec<Option<String>>,
}

impl Cluster {
    /// Starts the masters and pservers from `binary` under `dir`.
    pub async fn start(
        binary: PathBuf,
        dir: &Path,
        options: &ClusterOptions,
    ) -> anyhow::Result<Self> {
        let logs = dir.join("logs");
        std::fs::create_dir_all(&logs)?;
        let jobs: Vec<Option<&str>> = match options.jobs.is_empty() {
            true => vec![None],
            false => options.jobs.iter().map(|job| Some(job.as_str())).collect(),
        };
        let addrs = free_loopback_addrs(2 * MASTER_COUNT + options.pservers * jobs.len())?;
        let (loopback, rest) = addrs.split_at(MASTER_COUNT);
        let (raft_addrs, pserver_addrs) = rest.split_at(MASTER_COUNT);
        let namespaces = options.netns.then(|| Namespaces::create(MASTER_COUNT)).transpose()?;
        let master_addrs: Vec<String> = match &namespaces {
            Some(_) => (0..MASTER_COUNT)
                .map(|index| format!("{}:{MASTER_PORT}", Namespaces::addr(index)))
                .collect(),
            None => loopback.to_vec(),
        };
        let mut links = BTreeMap::new();
        for from in (0..MASTER_COUNT).filter(|_| namespaces.is_none()) {
            for to in (0..MASTER_COUNT).filter(|to| *to != from) {
                links.insert((from, to), LinkProxy::start(raft_addrs[to].clone()).await?);
            }
        }
        let mut processes = ProcessGroup::new(binary.clone(), &logs);
        processes.set_log_filter("info,openraft=warn");
        let mut cluster = Self {
            dir: dir.to_path_buf(),
            binary: binary.clone(),
            processes,
            master_addrs,
            links,
            namespaces,
            masters: Vec::new(),
            pservers: Vec::new(),
            pserver_addrs: pserver_addrs.to_vec(),
            pserver_jobs: Vec::new(),
            trainers: Vec::new(),
            trainer_datasets: Vec::new(),
        };
        for index in 0..MASTER_COUNT {
            cluster.add_master(index, &binary, raft_addrs, &options.master_args)?;
        }
        let pserver_jobs = jobs.iter().flat_map(|job| std::iter::repeat_n(*job, options.pservers));
        for (index, (addr, job)) in pserver_addrs.iter().zip(pserver_jobs).enumerate() {
            let args = cluster.pserver_args(addr, options.pserver_slots, job);
            cluster.pserver_jobs.push(job.unwrap_or_default().to_string());
            let process = cluster.processes.add(&format!("pserver-{index}"), args)?;
            cluster.pservers.push(process);
        }
        Ok(cluster)
    }

    /// Polls every process and records in `history` each exit seen since the last call.
    pub fn record_exits(&mut self, history: &History) {
        for process in 0..self.processes.len() {
            let _ = self.processes.exit_status(process);
        }
        for exit in self.processes.take_exits() {
            let f = Operation::ProcessExit { name: exit.name.clone() };
            tracing::info!(?exit, "process exit");
            history.record(SUPERVISOR_PROCESS, OpKind::Info, f, Value::Exit(exit));
        }
    }

    /// Every process log, for the report.
    pub fn log_paths(&self) -> Vec<PathBuf> {
        (0..self.processes.len())
            .map(|index| self.processes.log_path(index).to_path_buf())
            .collect()
    }

    /// The directory everything lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// SIGTERM everyone (resuming the paused first), SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        self.processes.terminate_all(grace);
    }
}
