//! The masters' processes: each started with its flags (directly, or inside its network
//! namespace), killed, restarted, paused, resumed, stopped gracefully with SIGTERM and a
//! bound, or (after its removal from the group) waited for, wiped and started again with
//! `--join`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use super::{Cluster, MASTER_COUNT, STOP_WAIT_MS_MAX};
use crate::supervisor::ProcessExit;

/// How often a stopping process is polled (the stop times reported are this precise).
const STOP_POLL_MS: u64 = 20;

impl Cluster {
    /// Starts master `index`: directly, or inside its namespace (`ip netns exec`).
    pub(super) fn add_master(
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

    pub fn pause_master(&self, index: usize) -> anyhow::Result<()> {
        self.processes.pause(self.masters[index])
    }

    pub fn resume_master(&self, index: usize) -> anyhow::Result<()> {
        self.processes.resume(self.masters[index])
    }

    pub fn is_master_running(&self, index: usize) -> bool {
        self.processes.pid(self.masters[index]).is_some()
    }

    /// Waits up to `limit` for master `index` to exit by itself (a removed master does);
    /// whether it did (the exit is kept for [`Cluster::record_exits`]). A master not running
    /// counts as exited.
    pub async fn wait_master_exit(&mut self, index: usize, limit: Duration) -> bool {
        let process = self.masters[index];
        let deadline = Instant::now() + limit;
        loop {
            match self.processes.exit_status(process) {
                Ok(Some(_)) | Err(_) => {
                    // Reaps it, so that it can be started again; its exit stays its own.
                    self.processes.kill(process);
                    return true;
                }
                Ok(None) if self.processes.pid(process).is_none() => return true,
                Ok(None) if Instant::now() >= deadline => return false,
                Ok(None) => tokio::time::sleep(Duration::from_millis(STOP_POLL_MS)).await,
            }
        }
    }

    /// Empties master `index`'s data directory and makes its next starts join the running
    /// group (`--join` the other masters, instead of `--peers`): a removed master comes back
    /// as a new member with the same id and addresses (so its proxies stay valid).
    pub fn wipe_to_join(&mut self, index: usize) -> anyhow::Result<()> {
        anyhow::ensure!(!self.is_master_running(index), "master-{} still runs", index + 1);
        let data_dir = self.dir.join(format!("master-{}", index + 1));
        match std::fs::remove_dir_all(&data_dir) {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(error).with_context(|| format!("wipe {}", data_dir.display()));
            }
        }
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("create {}", data_dir.display()))?;
        let others: Vec<String> = (0..MASTER_COUNT)
            .filter(|other| *other != index)
            .map(|other| self.master_addrs[other].clone())
            .collect();
        let process = self.masters[index];
        let args = join_args(self.processes.args(process), &others.join(","));
        self.processes.set_args(process, args);
        Ok(())
    }
}

/// `args` with `--peers LIST` replaced by `--join JOIN` (kept as they are if already joining).
fn join_args(args: &[String], join: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--peers" | "--join" => {
                words.next();
                out.extend(["--join".to_string(), join.to_string()]);
            }
            _ => out.push(word.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A master's flags with `--peers` become the same flags with `--join`, wherever they are
    /// (a namespaced master's come after `ip netns exec`), and stay so when done again.
    #[test]
    fn peers_become_join() {
        let words = |text: &str| text.split(' ').map(str::to_string).collect::<Vec<_>>();
        let args = words("master --id 2 --peers 1=a,2=b,3=c --data-dir d");
        let joined = join_args(&args, "a,c");
        assert_eq!(joined, words("master --id 2 --join a,c --data-dir d"));
        assert_eq!(join_args(&joined, "a,c"), joined);
    }
}
