//! Real `raftrain pserver` processes on loopback for end-to-end tests: start, pause, kill -9,
//! read their logs. Every process is killed when the set is dropped (they run under the
//! workspace's one supervisor, `supervisor`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use supervisor::ProcessGroup;

use crate::master_group::free_loopback_addr;

/// How long a test's `PServerClient` waits for a slot nobody serves before its call fails:
/// far past any replacement the tests make, so a test whose pservers all went fails naming
/// the slot instead of waiting for ever (the production default).
const TEST_REPLACE_WAIT: Duration = Duration::from_secs(120);

/// `PServerClient` options for tests: the defaults, with a bounded wait for a replacement.
pub fn test_client_options() -> client::pserver::PServerClientOptions {
    let replace_wait = Some(TEST_REPLACE_WAIT);
    client::pserver::PServerClientOptions { replace_wait, ..Default::default() }
}

pub struct PServerProcesses {
    /// The workspace's one supervisor: every pserver is killed when the set is dropped.
    processes: ProcessGroup,
    masters: String,
    checkpoint_dir: PathBuf,
    slot_count: u32,
    pub addrs: Vec<String>,
}

impl PServerProcesses {
    /// A set that serves `slot_count` slots, checkpointing every second into `dir`.
    pub fn new(masters: &[String], dir: &Path, slot_count: u32) -> Self {
        let mut processes = ProcessGroup::new(PathBuf::from(env!("CARGO_BIN_EXE_raftrain")), dir);
        processes.set_log_filter("info");
        Self {
            processes,
            masters: masters.join(","),
            checkpoint_dir: dir.join("checkpoints"),
            slot_count,
            addrs: Vec::new(),
        }
    }

    /// Starts one more pserver; its number is the returned index.
    pub fn spawn(&mut self) -> usize {
        self.spawn_with(&[])
    }

    /// Starts one more pserver with `extra` flags.
    pub fn spawn_with(&mut self, extra: &[&str]) -> usize {
        let (name, args) = self.next_args(extra);
        self.processes.add(&name, args).expect("start raftrain pserver")
    }

    /// Starts one more pserver with `extra` flags and `envs` environment variables, at most
    /// `nofile` file descriptors open (`prlimit`) when given.
    pub fn spawn_limited(
        &mut self,
        extra: &[&str],
        envs: &[(&str, &str)],
        nofile: Option<u64>,
    ) -> usize {
        let (name, mut args) = self.next_args(extra);
        if let Some(nofile) = nofile {
            let exe = env!("CARGO_BIN_EXE_raftrain").to_string();
            args.splice(0..0, [format!("--nofile={nofile}:{nofile}"), exe]);
        }
        let index = self.processes.add_stopped(&name, args);
        if nofile.is_some() {
            self.processes.set_program(index, PathBuf::from("prlimit"));
        }
        for (name, value) in envs {
            self.processes.set_env(index, name, value);
        }
        self.processes.spawn(index).expect("start raftrain pserver");
        index
    }

    /// Process id of pserver `index`, while it runs.
    pub fn pid(&self, index: usize) -> Option<u32> {
        self.processes.pid(index)
    }

    /// The process name and arguments of the next pserver; its address is recorded.
    fn next_args(&mut self, extra: &[&str]) -> (String, Vec<String>) {
        let addr = free_loopback_addr();
        let mut args: Vec<String> = [
            "pserver",
            "--masters",
            &self.masters,
            "--listen",
            &addr,
            "--checkpoint-dir",
            &self.checkpoint_dir.display().to_string(),
            "--num-pservers",
            &self.slot_count.to_string(),
            "--checkpoint-interval-s",
            "1",
        ]
        .iter()
        .map(|arg| arg.to_string())
        .collect();
        args.extend(extra.iter().map(|arg| arg.to_string()));
        let name = format!("pserver-{}", self.addrs.len());
        self.addrs.push(addr);
        (name, args)
    }

    pub fn kill(&mut self, index: usize) {
        self.processes.kill(index);
    }

    pub fn signal(&self, index: usize, signal: nix::sys::signal::Signal) {
        self.processes.signal(index, signal).expect("signal the pserver");
    }

    /// Waits up to `timeout` for pserver `index` to exit; its exit code, if it did.
    pub fn wait_exit(&mut self, index: usize, timeout: Duration) -> Option<i32> {
        let status = self.processes.wait_exit(index, timeout)?;
        Some(status.code().unwrap_or(-1))
    }

    pub fn log_path(&self, index: usize) -> PathBuf {
        self.processes.log_path(index).to_path_buf()
    }

    pub fn log(&self, index: usize) -> String {
        std::fs::read_to_string(self.log_path(index)).unwrap_or_default()
    }

    pub fn logs(&self) -> String {
        (0..self.addrs.len())
            .map(|index| format!("--- pserver {index}\n{}", self.log(index)))
            .collect()
    }
}
