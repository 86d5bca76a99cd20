//! A group of real `raftrain master` processes on loopback, for end-to-end tests: start, kill -9
//! and restart replicas, find the leader. Every process is killed when the group is dropped.

use master::client::{ClientOptions, MasterClient};
use proto::master::{StatusReply, StatusRequest};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct MasterGroup {
    pub dir: tempfile::TempDir,
    pub addrs: Vec<String>,
    peers: String,
    extra_args: Vec<String>,
    children: Vec<Option<Child>>,
}

impl MasterGroup {
    /// Starts `count` masters with `extra_args` (queue policy flags) on free loopback ports.
    pub fn start(count: usize, extra_args: &[&str]) -> Self {
        let addrs: Vec<String> = (0..count).map(|_| free_loopback_addr()).collect();
        let peers: Vec<String> =
            addrs.iter().enumerate().map(|(index, addr)| format!("{}={addr}", index + 1)).collect();
        let mut group = Self {
            dir: tempfile::tempdir().expect("create the group's directory"),
            addrs,
            peers: peers.join(","),
            extra_args: extra_args.iter().map(|arg| arg.to_string()).collect(),
            children: (0..count).map(|_| None).collect(),
        };
        for index in 0..count {
            group.spawn(index);
        }
        group
    }

    /// Starts (or restarts, on the same data directory) replica `index` (id `index + 1`).
    pub fn spawn(&mut self, index: usize) {
        assert!(self.children[index].is_none(), "master {} is already running", index + 1);
        let data_dir = self.dir.path().join(format!("master-{}", index + 1));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(index))
            .expect("open the log");
        let child = Command::new(env!("CARGO_BIN_EXE_raftrain"))
            .args(["master", "--id", &(index + 1).to_string(), "--listen", &self.addrs[index]])
            .args(["--peers", &self.peers, "--data-dir", &data_dir.display().to_string()])
            .args([
                "--heartbeat-ms",
                "100",
                "--election-timeout-min-ms",
                "400",
                "--election-timeout-max-ms",
                "800",
            ])
            .args(&self.extra_args)
            .env("RAFTRAIN_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start raftrain master");
        self.children[index] = Some(child);
    }

    /// SIGKILL: no graceful shutdown, no flush beyond what was already synced.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.children[index].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn log_path(&self, index: usize) -> PathBuf {
        self.dir.path().join(format!("master-{}.log", index + 1))
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
        let options =
            ClientOptions { call_deadline: Duration::from_secs(60), ..ClientOptions::default() };
        MasterClient::new(&self.addrs, options).expect("valid master addresses")
    }

    /// The linearizable status, through whichever master leads.
    pub async fn status(&self) -> StatusReply {
        let client = self.client();
        client
            .call("Status", |mut service| async move { service.status(StatusRequest {}).await })
            .await
            .expect("status")
    }

    /// The index (id - 1) of the current leader, as the linearizable status reports it.
    pub async fn leader_index(&self) -> usize {
        let status = self.status().await;
        let leader = status.cluster.expect("status names the cluster").leader_id;
        assert!(leader >= 1, "a status answer comes from a leader");
        leader as usize - 1
    }
}

impl Drop for MasterGroup {
    fn drop(&mut self) {
        for index in 0..self.children.len() {
            self.kill(index);
        }
    }
}

/// A loopback address nothing listens on right now (the kernel picked a free port).
pub fn free_loopback_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("a bound listener has an address").to_string()
}
