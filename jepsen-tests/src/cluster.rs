//! `Cluster`: three real masters whose Raft traffic runs through one [`LinkProxy`] per
//! ordered pair (so any partition can be cut), plus pservers, all supervised by one
//! [`ProcessGroup`] in a directory kept for the report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use master::client::{ClientOptions, MasterClient};

use crate::proxy::LinkProxy;
use crate::supervisor::{free_loopback_addrs, ProcessGroup};

/// Masters in the group.
pub const MASTER_COUNT: usize = 3;

/// What the cluster is asked to run.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    pub pserver_slots: u32,
    /// Pservers started (more than the slots: the rest wait as standbys).
    pub pservers: usize,
    /// Flags given to every master (queue policy, leases).
    pub master_args: Vec<String>,
}

pub struct Cluster {
    dir: PathBuf,
    processes: ProcessGroup,
    /// The masters' client addresses, by index (id - 1).
    pub master_addrs: Vec<String>,
    /// The proxy master `from` dials master `to`'s Raft port through, by `(from, to)`.
    links: BTreeMap<(usize, usize), LinkProxy>,
    /// The process index of each master, then of each pserver.
    masters: Vec<usize>,
    pub pservers: Vec<usize>,
    pub pserver_addrs: Vec<String>,
    /// The process index of each trainer (training workload only).
    pub trainers: Vec<usize>,
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
        let addrs = free_loopback_addrs(2 * MASTER_COUNT + options.pservers)?;
        let (master_addrs, rest) = addrs.split_at(MASTER_COUNT);
        let (raft_addrs, pserver_addrs) = rest.split_at(MASTER_COUNT);
        let mut links = BTreeMap::new();
        for from in 0..MASTER_COUNT {
            for to in (0..MASTER_COUNT).filter(|to| *to != from) {
                links.insert((from, to), LinkProxy::start(raft_addrs[to].clone()).await?);
            }
        }
        let mut processes = ProcessGroup::new(binary, &logs);
        processes.set_log_filter("info,openraft=warn");
        let mut cluster = Self {
            dir: dir.to_path_buf(),
            processes,
            master_addrs: master_addrs.to_vec(),
            links,
            masters: Vec::new(),
            pservers: Vec::new(),
            pserver_addrs: pserver_addrs.to_vec(),
            trainers: Vec::new(),
        };
        for index in 0..MASTER_COUNT {
            let args = cluster.master_args(index, raft_addrs, &options.master_args);
            let process = cluster.processes.add(&format!("master-{}", index + 1), args)?;
            cluster.masters.push(process);
        }
        for (index, addr) in pserver_addrs.iter().enumerate() {
            let args = cluster.pserver_args(addr, options.pserver_slots);
            let process = cluster.processes.add(&format!("pserver-{index}"), args)?;
            cluster.pservers.push(process);
        }
        Ok(cluster)
    }

    fn master_args(&self, index: usize, raft_addrs: &[String], extra: &[String]) -> Vec<String> {
        let peers: Vec<String> = self
            .master_addrs
            .iter()
            .enumerate()
            .map(|(peer, addr)| format!("{}={addr}", peer + 1))
            .collect();
        let dialled: Vec<String> = (0..MASTER_COUNT)
            .map(|peer| match self.links.get(&(index, peer)) {
                Some(link) => format!("{}={}", peer + 1, link.addr()),
                None => format!("{}={}", peer + 1, raft_addrs[peer]),
            })
            .collect();
        let data_dir = self.dir.join(format!("master-{}", index + 1));
        let mut args: Vec<String> = [
            "master",
            "--id",
            &(index + 1).to_string(),
            "--listen",
            &self.master_addrs[index],
            "--peers",
            &peers.join(","),
            "--peer-listen",
            &raft_addrs[index],
            "--peer-addrs",
            &dialled.join(","),
            "--data-dir",
            &data_dir.display().to_string(),
            "--data-root",
            &self.dir.display().to_string(),
            "--heartbeat-ms",
            "100",
            "--election-timeout-min-ms",
            "400",
            "--election-timeout-max-ms",
            "800",
            "--worker-threads",
            "1",
        ]
        .iter()
        .map(|arg| arg.to_string())
        .collect();
        args.extend(extra.iter().cloned());
        args
    }

    fn pserver_args(&self, addr: &str, slots: u32) -> Vec<String> {
        let checkpoints = self.dir.join("checkpoints").display().to_string();
        [
            "pserver",
            "--masters",
            &self.master_addrs.join(","),
            "--listen",
            addr,
            "--checkpoint-dir",
            &checkpoints,
            "--num-pservers",
            &slots.to_string(),
            "--checkpoint-interval-s",
            "1",
            "--worker-threads",
            "1",
        ]
        .iter()
        .map(|arg| arg.to_string())
        .collect()
    }

    /// A client of the whole group with `deadline` per logical call.
    pub fn client(&self, deadline: Duration) -> anyhow::Result<MasterClient> {
        let options = ClientOptions {
            call_deadline: deadline,
            rpc_timeout: Duration::from_millis(500).min(deadline),
            ..ClientOptions::default()
        };
        Ok(MasterClient::new(&self.master_addrs, options)?)
    }

    /// The master (index) that the highest term's answers name as leader, if any answers.
    pub async fn leader(&self) -> Option<usize> {
        let client = self.client(Duration::from_millis(500)).ok()?;
        let mut best: Option<(u64, u64)> = None;
        for addr in &self.master_addrs {
            let Ok(info) = client.member_info(addr).await else { continue };
            if info.leader_id != 0 && best.is_none_or(|(term, _)| info.term > term) {
                best = Some((info.term, info.leader_id));
            }
        }
        best.map(|(_, leader)| leader as usize - 1)
    }

    pub fn kill_master(&mut self, index: usize) {
        self.processes.kill(self.masters[index]);
    }

    pub fn restart_master(&mut self, index: usize) -> anyhow::Result<()> {
        self.processes.spawn(self.masters[index])
    }

    pub fn pause_master(&self, index: usize) -> anyhow::Result<()> {
        self.processes.pause(self.masters[index])
    }

    pub fn resume_master(&self, index: usize) -> anyhow::Result<()> {
        self.processes.resume(self.masters[index])
    }

    pub fn is_master_running(&self, index: usize) -> bool {
        self.processes.pid(self.masters[index]).is_some()
    }

    pub fn kill_pserver(&mut self, index: usize) {
        self.processes.kill(self.pservers[index]);
    }

    /// Starts pserver `index` again (reaping it first if it exited by itself).
    pub fn restart_pserver(&mut self, index: usize) -> anyhow::Result<()> {
        self.reap_pserver(index);
        self.processes.spawn(self.pservers[index])
    }

    pub fn pause_pserver(&self, index: usize) -> anyhow::Result<()> {
        self.processes.pause(self.pservers[index])
    }

    /// Resumes pserver `index`; if it exited meanwhile (its slot went elsewhere), starts it
    /// again as a standby.
    pub fn resume_pserver(&mut self, index: usize) -> anyhow::Result<()> {
        if self.is_pserver_running(index) {
            return self.processes.resume(self.pservers[index]);
        }
        self.reap_pserver(index);
        self.restart_pserver(index)
    }

    /// Whether pserver `index` runs (it exits by itself when its slot went elsewhere).
    pub fn is_pserver_running(&mut self, index: usize) -> bool {
        let process = self.pservers[index];
        match self.processes.exit_status(process) {
            Ok(None) => self.processes.pid(process).is_some(),
            _ => false,
        }
    }

    /// Reaps pserver `index` if it exited by itself, so it can be started again.
    pub fn reap_pserver(&mut self, index: usize) {
        if !self.is_pserver_running(index) {
            self.processes.kill(self.pservers[index]);
        }
    }

    /// Starts a trainer process with `args`.
    pub fn add_trainer(&mut self, args: Vec<String>) -> anyhow::Result<()> {
        let name = format!("trainer-{}", self.trainers.len());
        let process = self.processes.add(&name, args)?;
        self.trainers.push(process);
        Ok(())
    }

    pub fn kill_trainer(&mut self, index: usize) {
        self.processes.kill(self.trainers[index]);
    }

    pub fn pause_trainer(&self, index: usize) -> anyhow::Result<()> {
        self.processes.pause(self.trainers[index])
    }

    pub fn resume_trainer(&self, index: usize) -> anyhow::Result<()> {
        self.processes.resume(self.trainers[index])
    }

    /// Starts trainer `index` again unless it finished the job (exit 0).
    pub fn restart_trainer(&mut self, index: usize) -> anyhow::Result<()> {
        let process = self.trainers[index];
        if matches!(self.processes.exit_status(process)?, Some(status) if status.success()) {
            return Ok(());
        }
        self.processes.kill(process);
        self.processes.spawn(process)
    }

    /// Whether every trainer has exited 0; an error names one that failed, with its log.
    pub fn trainers_done(&mut self) -> anyhow::Result<bool> {
        let mut done = true;
        for process in self.trainers.clone() {
            match self.processes.exit_status(process)? {
                Some(status) if !status.success() => {
                    let tail = crate::supervisor::log_tail(self.processes.log_path(process), 20);
                    anyhow::bail!("{} failed ({status}):\n{tail}", self.processes.name(process));
                }
                Some(_) => {}
                None => done = false,
            }
        }
        Ok(done)
    }

    /// Cuts every link between `side` and the other masters, both ways.
    pub fn isolate(&self, side: &[usize]) {
        for ((from, to), link) in &self.links {
            if side.contains(from) != side.contains(to) {
                link.cut();
            }
        }
    }

    /// Cuts the link `from -> to` only (and its answers).
    pub fn cut(&self, from: usize, to: usize) {
        if let Some(link) = self.links.get(&(from, to)) {
            link.cut();
        }
    }

    /// Heals every link and resumes every paused master.
    pub fn heal_links(&self) {
        self.links.values().for_each(LinkProxy::heal);
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
