//! The masters' processes: each started with its flags (directly, or inside its network
//! namespace), killed, restarted, paused, resumed, or stopped gracefully with SIGTERM and a
//! bound.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
}
