//! A group of real `raftrain master` processes on loopback, for end-to-end tests: start, kill -9
//! and restart replicas, find the leader. Every process is killed when the group is dropped
//! (the processes run under the workspace's one supervisor, `supervisor`).

use client::JobStatus;
use client::{ClientOptions, MasterClient};
use proto::master::master_service_client::MasterServiceClient;
use std::path::PathBuf;
use std::time::Duration;
use supervisor::ProcessGroup;
use tonic::transport::Channel;

/// Every replica's election timeouts (min, max), heartbeats every 100 ms.
const ELECTION_TIMEOUTS_MS: (u64, u64) = (400, 800);
/// A favoured replica's: it campaigns 470-520 ms after the last heartbeat, the others only
/// after 1,200-1,600 ms (openraft waits the lease, the max, plus a random timeout).
const FAVOURED_ELECTION_TIMEOUTS_MS: (u64, u64) = (210, 260);

pub struct MasterGroup {
    /// The workspace's one supervisor: every replica is killed when the group is dropped
    /// (declared first, so they die before their directory is removed).
    processes: ProcessGroup,
    pub dir: tempfile::TempDir,
    pub addrs: Vec<String>,
    peers: String,
    extra_args: Vec<String>,
    /// Election timeouts (min, max) per replica; the default favours no one.
    election_timeouts_ms: Vec<(u64, u64)>,
    /// Per replica: the masters it joins through (`--join`) instead of `--peers`.
    joins: Vec<Option<String>>,
}

impl MasterGroup {
    /// Starts `count` masters with `extra_args` (queue policy flags) on free loopback ports.
    pub fn start(count: usize, extra_args: &[&str]) -> Self {
        Self::start_with_env(count, extra_args, &[])
    }

    /// Like `start`, with `(index, name, value)` environment variables for single replicas.
    pub fn start_with_env(count: usize, extra_args: &[&str], envs: &[(usize, &str, &str)]) -> Self {
        let mut group = Self::prepare(count, extra_args);
        for (index, name, value) in envs {
            group.processes.set_env(*index, name, value);
        }
        for index in 0..count {
            group.spawn(index);
        }
        group
    }

    /// A group of `count` masters with `extra_args`, none of them started yet (`spawn` each).
    pub fn prepare(count: usize, extra_args: &[&str]) -> Self {
        let addrs: Vec<String> = (0..count).map(|_| free_loopback_addr()).collect();
        let peers: Vec<String> =
            addrs.iter().enumerate().map(|(index, addr)| format!("{}={addr}", index + 1)).collect();
        let dir = tempfile::tempdir().expect("create the group's directory");
        let mut processes =
            ProcessGroup::new(PathBuf::from(env!("CARGO_BIN_EXE_raftrain")), dir.path());
        processes.set_log_filter("info");
        let mut group = Self {
            dir,
            addrs,
            peers: peers.join(","),
            extra_args: extra_args.iter().map(|arg| arg.to_string()).collect(),
            election_timeouts_ms: vec![ELECTION_TIMEOUTS_MS; count],
            joins: vec![None; count],
            processes,
        };
        for index in 0..count {
            group.processes.add_stopped(&format!("master-{}", index + 1), Vec::new());
        }
        group
    }

    /// Starts (or restarts, on the same data directory) replica `index` (id `index + 1`).
    pub fn spawn(&mut self, index: usize) {
        let data_dir = self.dir.path().join(format!("master-{}", index + 1));
        let (min_ms, max_ms) = self.election_timeouts_ms[index];
        let mut args: Vec<String> = [
            "master",
            "--id",
            &(index + 1).to_string(),
            "--listen",
            &self.addrs[index],
            self.joins[index].as_ref().map_or("--peers", |_| "--join"),
            self.joins[index].as_ref().unwrap_or(&self.peers),
            "--data-dir",
            &data_dir.display().to_string(),
            "--heartbeat-ms",
            "100",
            "--election-timeout-min-ms",
            &min_ms.to_string(),
            "--election-timeout-max-ms",
            &max_ms.to_string(),
        ]
        .iter()
        .map(|arg| arg.to_string())
        .collect();
        args.extend(self.extra_args.iter().cloned());
        self.processes.set_args(index, args);
        self.processes.spawn(index).expect("start raftrain master");
    }

    /// A new replica (id `index + 1`, a new address and directory) that joins the group
    /// through `through` (`--join`), started; its index.
    pub fn add_joiner(&mut self, through: &[String]) -> usize {
        self.add_joiner_with_env(through, &[])
    }

    /// Like `add_joiner`, with environment variables `(name, value)` for the new replica.
    pub fn add_joiner_with_env(&mut self, through: &[String], envs: &[(&str, &str)]) -> usize {
        let index = self.addrs.len();
        self.addrs.push(free_loopback_addr());
        self.election_timeouts_ms.push(ELECTION_TIMEOUTS_MS);
        self.joins.push(Some(through.join(",")));
        self.processes.add_stopped(&format!("master-{}", index + 1), Vec::new());
        for (name, value) in envs {
            self.processes.set_env(index, name, value);
        }
        self.spawn(index);
        index
    }

    /// Starts replica `index` again, joining the group through `through` (`--join`) from now
    /// on instead of `--peers`.
    pub fn rejoin(&mut self, index: usize, through: &[String]) {
        self.joins[index] = Some(through.join(","));
        self.spawn(index);
    }

    /// Restarts, as its supervisor would, every replica that exited because its Raft core
    /// stopped (`raftrain master` exits with an error then, by design, for a StatefulSet or
    /// systemd to restart it); any other exit fails the test with the replica's log.
    pub fn supervise(&mut self) {
        for index in 0..self.addrs.len() {
            let status = self.processes.exit_status(index).expect("poll a replica");
            let Some(status) = status else { continue };
            // The exit's own last lines: the log holds every earlier run of the replica too.
            let last_words = supervisor::log_tail(&self.log_path(index), 5);
            assert!(
                last_words.contains("the Raft core stopped"),
                "replica {index} exited with {status}\n{}",
                self.logs()
            );
            tracing::warn!(index, %status, "the replica's Raft core stopped: restart it");
            self.spawn(index);
        }
    }

    /// Waits up to `timeout` for replica `index` to exit by itself; its status (`None`: still
    /// running).
    pub fn wait_exit(
        &mut self,
        index: usize,
        timeout: Duration,
    ) -> Option<std::process::ExitStatus> {
        tokio::task::block_in_place(|| self.processes.wait_exit(index, timeout))
    }

    /// SIGKILL: no graceful shutdown, no flush beyond what was already synced.
    pub fn kill(&mut self, index: usize) {
        self.processes.kill(index);
    }

    /// SIGTERM, as Kubernetes, systemd and `docker stop` send it; waits up to `timeout` for the
    /// replica to exit and returns its status (`None`: still running).
    pub fn terminate(
        &mut self,
        index: usize,
        timeout: Duration,
    ) -> Option<std::process::ExitStatus> {
        self.signal(index, nix::sys::signal::Signal::SIGTERM);
        tokio::task::block_in_place(|| self.processes.wait_exit(index, timeout))
    }

    /// Gives replica `index` shorter election timeouts from its next start, so that it wins
    /// any election it takes part in (the others wait far longer before they campaign).
    pub fn favour(&mut self, index: usize) {
        self.election_timeouts_ms[index] = FAVOURED_ELECTION_TIMEOUTS_MS;
    }

    /// Runs replica `index` as `program` (another build of `raftrain`) from its next start;
    /// `None` puts this build back.
    pub fn set_program(&mut self, index: usize, program: Option<&std::path::Path>) {
        match program {
            Some(program) => self.processes.set_program(index, program.to_path_buf()),
            None => self.processes.reset_program(index),
        }
    }

    /// Sets an environment variable for replica `index`'s next start.
    pub fn set_env(&mut self, index: usize, name: &str, value: &str) {
        self.processes.set_env(index, name, value);
    }

    /// Sends `signal` to replica `index` (SIGSTOP pauses it, SIGCONT resumes it).
    pub fn signal(&self, index: usize, signal: nix::sys::signal::Signal) {
        self.processes.signal(index, signal).expect("signal the replica");
    }

    pub fn log_path(&self, index: usize) -> PathBuf {
        self.processes.log_path(index).to_path_buf()
    }

    /// The address replica `index` serves metrics and the dashboard on, as it logged it once
    /// bound: a test passes `--metrics-listen 127.0.0.1:0` rather than a port it picked, which
    /// another process could take before the replica binds it.
    pub async fn metrics_addr(&self, index: usize) -> String {
        const BOUND: &str = "metrics served at http://";
        for _ in 0..300 {
            let log = std::fs::read_to_string(self.log_path(index)).unwrap_or_default();
            if let Some(addr) = log.split(BOUND).nth(1).and_then(|rest| rest.split('/').next()) {
                return addr.to_string();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("replica {index} never logged its metrics address\n{}", self.logs());
    }

    /// Every replica's log, for a failing test's message.
    pub fn logs(&self) -> String {
        (0..self.addrs.len())
            .map(|index| {
                format!(
                    "--- master {}\n{}",
                    index + 1,
                    std::fs::read_to_string(self.log_path(index)).unwrap_or_default()
                )
            })
            .collect()
    }

    pub fn client(&self) -> MasterClient {
        self.client_within(Duration::from_secs(60))
    }

    /// A client of the group whose calls give up after `deadline` (retries included).
    pub fn client_within(&self, deadline: Duration) -> MasterClient {
        let options = ClientOptions { call_deadline: Some(deadline), ..ClientOptions::default() };
        MasterClient::new(&self.addrs, options).expect("valid master addresses")
    }

    /// Process id of replica `index`, while it runs.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.processes.pid(index)
    }

    /// The linearizable status, through whichever master leads.
    pub async fn status(&self) -> JobStatus {
        self.client().status().await.expect("status")
    }

    /// A raw protobuf client of the current leader, for tests that send hand-made requests.
    pub async fn leader_service(&self) -> MasterServiceClient<Channel> {
        self.service(self.leader_index().await).await
    }

    /// A raw protobuf client of replica `index` (not of whichever leads).
    pub async fn service(&self, index: usize) -> MasterServiceClient<Channel> {
        let addr = &self.addrs[index];
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("a valid address")
            .timeout(Duration::from_secs(15))
            .connect()
            .await
            .expect("connect to the master");
        MasterServiceClient::new(channel)
    }

    /// The index (id - 1) of the current leader, as the linearizable status reports it.
    pub async fn leader_index(&self) -> usize {
        let status = self.status().await;
        let leader = status.group.leader_id.expect("a status answer names its leader");
        assert!(leader >= 1, "a status answer comes from a leader");
        leader as usize - 1
    }
}

/// A loopback address nothing listens on right now, below the kernel's ephemeral port range
/// (`supervisor::free_loopback_addr` says why).
pub fn free_loopback_addr() -> String {
    supervisor::free_loopback_addr().expect("a free loopback port")
}
