//! Real `raftrain pserver` processes on loopback for end-to-end tests: start, pause, kill -9,
//! read their logs. Every process is killed when the set is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::master_group::free_loopback_addr;

pub struct PServerProcesses {
    masters: String,
    checkpoint_dir: PathBuf,
    log_dir: PathBuf,
    slot_count: u32,
    pub addrs: Vec<String>,
    children: Vec<Option<Child>>,
}

impl PServerProcesses {
    /// A set that serves `slot_count` slots, checkpointing every second into `dir`.
    pub fn new(masters: &[String], dir: &Path, slot_count: u32) -> Self {
        let checkpoint_dir = dir.join("checkpoints");
        Self {
            masters: masters.join(","),
            checkpoint_dir,
            log_dir: dir.to_path_buf(),
            slot_count,
            addrs: Vec::new(),
            children: Vec::new(),
        }
    }

    /// Starts one more pserver; its number is the returned index.
    pub fn spawn(&mut self) -> usize {
        self.spawn_with(&[])
    }

    /// Starts one more pserver with `extra` flags.
    pub fn spawn_with(&mut self, extra: &[&str]) -> usize {
        let index = self.children.len();
        let addr = free_loopback_addr();
        let log = std::fs::File::create(self.log_path(index)).expect("create the log");
        let child = Command::new(env!("CARGO_BIN_EXE_raftrain"))
            .args(["pserver", "--masters", &self.masters, "--listen", &addr])
            .args(["--checkpoint-dir", &self.checkpoint_dir.display().to_string()])
            .args(["--num-pservers", &self.slot_count.to_string(), "--checkpoint-interval-s", "1"])
            .args(extra)
            .env("RAFTRAIN_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start raftrain pserver");
        self.addrs.push(addr);
        self.children.push(Some(child));
        index
    }

    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.children[index].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub fn signal(&self, index: usize, signal: nix::sys::signal::Signal) {
        let child = self.children[index].as_ref().expect("the pserver runs");
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pids fit in i32"));
        nix::sys::signal::kill(pid, signal).expect("signal the pserver");
    }

    /// Waits up to `timeout` for pserver `index` to exit; its exit code, if it did.
    pub fn wait_exit(&mut self, index: usize, timeout: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + timeout;
        let child = self.children[index].as_mut().expect("the pserver was started");
        while std::time::Instant::now() < deadline {
            if let Some(status) = child.try_wait().expect("poll the child") {
                self.children[index] = None;
                return Some(status.code().unwrap_or(-1));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn log_path(&self, index: usize) -> PathBuf {
        self.log_dir.join(format!("pserver-{index}.log"))
    }

    pub fn log(&self, index: usize) -> String {
        std::fs::read_to_string(self.log_path(index)).unwrap_or_default()
    }

    pub fn logs(&self) -> String {
        (0..self.children.len())
            .map(|index| format!("--- pserver {index}\n{}", self.log(index)))
            .collect()
    }
}

impl Drop for PServerProcesses {
    fn drop(&mut self) {
        for index in 0..self.children.len() {
            self.kill(index);
        }
    }
}
