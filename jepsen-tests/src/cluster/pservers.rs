//! The pservers' processes: each started with its flags (per job), killed, restarted, paused,
//! resumed, and reaped when it exited by itself (its slot went elsewhere).

use super::Cluster;

impl Cluster {
    pub(super) fn pserver_args(&self, addr: &str, slots: u32, job: Option<&str>) -> Vec<String> {
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
}
