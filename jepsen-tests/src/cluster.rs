//! `Cluster`: three real masters whose Raft traffic runs through one [`LinkProxy`] per
//! ordered pair (so any partition can be cut), plus pservers, all supervised by one
//! [`ProcessGroup`] in a directory kept for the report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use client::{ClientOptions, MasterClient};

use crate::history::{History, OpKind, Operation, Value, SUPERVISOR_PROCESS};
use crate::netns::Namespaces;
use crate::proxy::LinkProxy;
use crate::supervisor::{free_loopback_addrs, ProcessExit, ProcessGroup};

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
/// How often a stopping process is polled (the stop times reported are this precise).
const STOP_POLL_MS: u64 = 20;
/// How often a restarted master is asked whether it is back.
const REJOIN_POLL_MS: u64 = 200;
/// A trainer given a broken view of its data sees the first this-many-parts of the file.
const BROKEN_DATA_FRACTION: u64 = 2;

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

    fn pserver_args(&self, addr: &str, slots: u32, job: Option<&str>) -> Vec<String> {
        let checkpoints = match job {
            Some(job) => self.dir.join(job).join("checkpoints"),
            None => self.dir.join("checkpoints"),
        };
        let checkpoints = checkpoints.display().to_string();
        let job_args = job.map(|job| ["--job".to_string(), job.to_string()]);
        let args: Vec<String> = [
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
        .collect();
        args.into_iter().chain(job_args.into_iter().flatten()).collect()
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
            let Some(leader_id) = info.leader_id else { continue };
            if best.is_none_or(|(term, _)| info.term > term) {
                best = Some((info.term, leader_id));
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

    /// SIGTERM master `index` and wait (up to [`STOP_WAIT_MS_MAX`], then SIGKILL) for it to
    /// exit; how it exited (also kept for [`Cluster::record_exits`]), unless it had already.
    pub async fn terminate_master(&mut self, index: usize) -> anyhow::Result<Option<ProcessExit>> {
        let process = self.masters[index];
        self.processes.begin_stop(process)?;
        let deadline = Instant::now() + Duration::from_millis(STOP_WAIT_MS_MAX);
        loop {
            let force = Instant::now() >= deadline;
            if let Some(exit) = self.processes.finish_stop(process, force) {
                return Ok(Some(exit));
            }
            if force || self.processes.pid(process).is_none() {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(STOP_POLL_MS)).await;
        }
    }

    /// Waits until restarted master `index` is back in the group: it answers, follows a
    /// leader (or leads) and has applied what the leader had applied when asked. How long
    /// that took, or `None` after [`REJOIN_WAIT_MS_MAX`].
    pub async fn wait_rejoined(&self, index: usize) -> Option<Duration> {
        let started = Instant::now();
        let limit = Duration::from_millis(REJOIN_WAIT_MS_MAX);
        let client = self.client(Duration::from_secs(1)).ok()?;
        while started.elapsed() < limit {
            if self.is_caught_up(&client, index).await {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(REJOIN_POLL_MS)).await;
        }
        None
    }

    /// Whether master `index` itself answers, names a leader of the current term that
    /// agrees, and (unless it leads) has applied what that leader had applied.
    async fn is_caught_up(&self, client: &MasterClient, index: usize) -> bool {
        let Ok(member) = client.member_info(&self.master_addrs[index]).await else {
            return false;
        };
        let Some(leader) = member.leader_id.and_then(|id| (id as usize).checked_sub(1)) else {
            return false;
        };
        let Some(leader_addr) = self.master_addrs.get(leader) else { return false };
        let Ok(leading) = client.member_info(leader_addr).await else { return false };
        let agreed = leading.leader_id == member.leader_id && leading.term == member.term;
        agreed && (leader == index || member.last_applied_index >= leading.last_applied_index)
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

    /// Records restarted master `index`'s rejoin (or that it did not within the bound).
    pub async fn record_rejoin(&self, index: usize, history: &History) {
        let f = Operation::Rejoin { master: index as u64 + 1 };
        history.record(SUPERVISOR_PROCESS, OpKind::Invoke, f.clone(), Value::None);
        let (kind, value) = match self.wait_rejoined(index).await {
            Some(took) => (OpKind::Ok, Value::Elapsed { elapsed_ms: took.as_millis() as u64 }),
            None => (OpKind::Info, Value::Elapsed { elapsed_ms: REJOIN_WAIT_MS_MAX }),
        };
        history.record(SUPERVISOR_PROCESS, kind, f, value);
    }

    /// Makes every link of master `index` half-open: packets vanish, nothing is refused or
    /// reset. With namespaces the master's host falls silent for everyone (peers and clients);
    /// with proxies its Raft links to and from its peers stall (clients still reach it).
    /// Returns how: `"netns-pfifo-drop"` or `"proxy-stall"`.
    pub fn half_open(&self, index: usize) -> anyhow::Result<&'static str> {
        if let Some(namespaces) = &self.namespaces {
            namespaces.silence(index)?;
            return Ok("netns-pfifo-drop");
        }
        for ((from, to), link) in &self.links {
            if *from == index || *to == index {
                link.stall();
            }
        }
        Ok("proxy-stall")
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

    /// Starts a trainer process with `args`; with `private_mounts`, in a mount namespace of
    /// its own (`unshare --mount --propagation private`, root only), so that its view of the
    /// data can later be broken without touching anyone else's.
    pub fn add_trainer(&mut self, args: Vec<String>, private_mounts: bool) -> anyhow::Result<()> {
        let name = format!("trainer-{}", self.trainers.len());
        let dataset = args.iter().skip_while(|arg| *arg != "--dataset").nth(1).cloned();
        let process = match private_mounts {
            false => self.processes.add(&name, args)?,
            true => {
                let mut wrapped: Vec<String> = ["--mount", "--propagation", "private"]
                    .iter()
                    .map(|arg| arg.to_string())
                    .collect();
                wrapped.push(self.binary.display().to_string());
                wrapped.extend(args);
                let process = self.processes.add_stopped(&name, wrapped);
                self.processes.set_program(process, PathBuf::from("unshare"));
                self.processes.spawn(process)?;
                process
            }
        };
        self.trainers.push(process);
        self.trainer_datasets.push(dataset);
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

    /// Starts trainer `index` again (with its real data) unless it finished the job (exit 0).
    pub fn restart_trainer(&mut self, index: usize) -> anyhow::Result<()> {
        let process = self.trainers[index];
        if self.trainer_finished(index)? {
            return Ok(());
        }
        self.processes.kill(process);
        self.processes.spawn(process)
    }

    fn trainer_finished(&mut self, index: usize) -> anyhow::Result<bool> {
        let status = self.processes.exit_status(self.trainers[index])?;
        Ok(status.is_some_and(|status| status.success()))
    }

    /// Whether trainer `index` runs now.
    fn is_trainer_running(&mut self, index: usize) -> bool {
        let process = self.trainers[index];
        matches!(self.processes.exit_status(process), Ok(None))
            && self.processes.pid(process).is_some()
    }

    /// Breaks running trainer `index`'s view of its data mid-run: inside its own mount
    /// namespace (it must have been added with `private_mounts`), a truncated copy of its
    /// dataset file is bind-mounted over the file, as when a mount goes bad under a running
    /// job; everyone else still sees the whole file. Returns whether it was running.
    pub fn break_trainer_data(&mut self, index: usize) -> anyhow::Result<bool> {
        if !self.is_trainer_running(index) {
            return Ok(false);
        }
        let dataset = self.trainer_dataset(index)?;
        let broken = self.truncated_copy(Path::new(&dataset))?;
        let broken = broken.display().to_string();
        self.in_trainer_mounts(index, &["mount", "--bind", &broken, &dataset])?;
        Ok(true)
    }

    /// Gives trainer `index` its real data back: unmounts the broken copy if it still runs,
    /// starts it again if it stopped (it may give up on data it cannot read).
    pub fn mend_trainer_data(&mut self, index: usize) -> anyhow::Result<()> {
        if !self.is_trainer_running(index) {
            return self.restart_trainer(index);
        }
        let dataset = self.trainer_dataset(index)?;
        self.in_trainer_mounts(index, &["umount", &dataset])
    }

    fn trainer_dataset(&self, index: usize) -> anyhow::Result<String> {
        self.trainer_datasets[index].clone().context("the trainer has a --dataset")
    }

    /// Runs `command` in trainer `index`'s mount namespace (`nsenter --mount`).
    fn in_trainer_mounts(&self, index: usize, command: &[&str]) -> anyhow::Result<()> {
        let pid = self.processes.pid(self.trainers[index]).context("the trainer runs")?;
        let output = std::process::Command::new("nsenter")
            .args(["--target", &pid.to_string(), "--mount", "--"])
            .args(command)
            .output()
            .context("run nsenter")?;
        anyhow::ensure!(
            output.status.success(),
            "nsenter {}: {}",
            command.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(())
    }

    /// `<dir>/broken/<name>`: the first 1/[`BROKEN_DATA_FRACTION`] of `dataset`, cut
    /// mid-chunk.
    fn truncated_copy(&self, dataset: &Path) -> anyhow::Result<PathBuf> {
        let broken_dir = self.dir.join("broken");
        std::fs::create_dir_all(&broken_dir)?;
        let name = dataset.file_name().context("the dataset is a file")?;
        let broken = broken_dir.join(name);
        let bytes =
            std::fs::read(dataset).with_context(|| format!("read {}", dataset.display()))?;
        let kept = bytes.len() as u64 / BROKEN_DATA_FRACTION + 7;
        let kept = usize::try_from(kept.min(bytes.len() as u64)).context("a length fits")?;
        std::fs::write(&broken, &bytes[..kept])
            .with_context(|| format!("write {}", broken.display()))?;
        Ok(broken)
    }

    /// Whether every trainer has exited (0 or not: a failure is the checkers' to judge).
    pub fn trainers_done(&mut self) -> anyhow::Result<bool> {
        for process in self.trainers.clone() {
            if self.processes.exit_status(process)?.is_none() {
                return Ok(false);
            }
        }
        Ok(true)
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
