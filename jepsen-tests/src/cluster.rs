//! `Cluster`: three real masters whose Raft traffic runs through one [`LinkProxy`] per
//! ordered pair (so any partition can be cut), plus pservers, all supervised by one
//! [`ProcessGroup`] in a directory kept for the report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use master::client::{ClientOptions, MasterClient};

use crate::netns::Namespaces;
use crate::proxy::LinkProxy;
use crate::supervisor::{free_loopback_addrs, ProcessGroup};

/// Masters in the group.
pub const MASTER_COUNT: usize = 3;
/// The masters' port in their own namespaces.
const MASTER_PORT: u16 = 7000;

/// What the cluster is asked to run.
#[derive(Clone, Debug)]
pub struct ClusterOptions {
    pub pserver_slots: u32,
    /// Pservers started (more than the slots: the rest wait as standbys).
    pub pservers: usize,
    /// Flags given to every master (queue policy, leases).
    pub master_args: Vec<String>,
    /// Give each master a network namespace and cut links with routes (needs root) instead
    /// of running Raft through the TCP proxies.
    pub netns: bool,
}

pub struct Cluster {
    dir: PathBuf,
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
            processes,
            master_addrs,
            links,
            namespaces,
            masters: Vec::new(),
            pservers: Vec::new(),
            pserver_addrs: pserver_addrs.to_vec(),
            trainers: Vec::new(),
        };
        for index in 0..MASTER_COUNT {
            cluster.add_master(index, &binary, raft_addrs, &options.master_args)?;
        }
        for (index, addr) in pserver_addrs.iter().enumerate() {
            let args = cluster.pserver_args(addr, options.pserver_slots);
            let process = cluster.processes.add(&format!("pserver-{index}"), args)?;
            cluster.pservers.push(process);
        }
        Ok(cluster)
    }

    /// Starts master `index`: directly, or inside its namespace (`ip netns exec`).
    fn add_master(
        &mut self,
        index: usize,
        binary: &Path,
        raft_addrs: &[String],
        extra: &[String],
    ) -> anyhow::Result<()> {
        let mut args = self.master_args(index, raft_addrs, extra);
        let name = format!("master-{}", index + 1);
        let process = match &self.namespaces {
            None => self.processes.add(&name, args)?,
            Some(namespaces) => {
                let mut wrapped = namespaces.exec_prefix(index);
                wrapped.push(binary.display().to_string());
                wrapped.append(&mut args);
                let process = self.processes.add_stopped(&name, wrapped);
                self.processes.set_program(process, PathBuf::from("ip"));
                self.processes.spawn(process)?;
                process
            }
        };
        self.masters.push(process);
        Ok(())
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
        let raft_flags = [
            "--peer-listen".to_string(),
            raft_addrs[index].clone(),
            "--peer-addrs".to_string(),
            dialled.join(","),
        ];
        let mut args: Vec<String> = [
            "master",
            "--id",
            &(index + 1).to_string(),
            "--listen",
            &self.master_addrs[index],
            "--peers",
            &peers.join(","),
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
        if self.namespaces.is_none() {
            args.extend(raft_flags);
        }
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
            call_deadline: Some(deadline),
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
    pub fn isolate(&self, side: &[usize]) -> anyhow::Result<()> {
        for from in 0..MASTER_COUNT {
            for to in (0..MASTER_COUNT).filter(|to| side.contains(&from) != side.contains(to)) {
                self.cut(from, to)?;
            }
        }
        Ok(())
    }

    /// Cuts the link `from -> to` (a proxy: that direction's connections; a namespace: every
    /// packet `from` sends to `to`).
    pub fn cut(&self, from: usize, to: usize) -> anyhow::Result<()> {
        if let Some(namespaces) = &self.namespaces {
            return namespaces.cut(from, to);
        }
        if let Some(link) = self.links.get(&(from, to)) {
            link.cut();
        }
        Ok(())
    }

    /// Degrades master `index`'s links: with namespaces and `netem`, 150 ms of delay and 20%
    /// loss on everything it sends; otherwise its link to the next master is cut.
    pub fn clog(&self, index: usize) -> anyhow::Result<()> {
        match &self.namespaces {
            Some(namespaces) if namespaces.can_slow() => namespaces.slow(index, 150, 20),
            _ => self.cut(index, (index + 1) % MASTER_COUNT),
        }
    }

    /// Heals every link.
    pub fn heal_links(&self) -> anyhow::Result<()> {
        self.links.values().for_each(LinkProxy::heal);
        match &self.namespaces {
            Some(namespaces) => namespaces.heal(),
            None => Ok(()),
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
