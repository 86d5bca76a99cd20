//! The trainers' processes (training workload only): each started, optionally in a mount
//! namespace of its own, killed, paused, resumed, restarted unless it finished the job.

use std::path::PathBuf;

use super::Cluster;

impl Cluster {
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
    pub(super) fn is_trainer_running(&mut self, index: usize) -> bool {
        let process = self.trainers[index];
        matches!(self.processes.exit_status(process), Ok(None))
            && self.processes.pid(process).is_some()
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
}
