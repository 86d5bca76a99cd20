//! A whole training job as real processes: masters, pservers and trainers on loopback, each
//! logging to a file, all killed when the job is dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use crate::master_group::MasterGroup;
use crate::pserver_processes::PServerProcesses;

pub struct TrainingJob {
    pub masters: MasterGroup,
    pub pservers: PServerProcesses,
    pub dir: PathBuf,
    trainer_args: Vec<String>,
    trainers: Vec<Option<Child>>,
}

impl TrainingJob {
    /// `master_count` masters and `pserver_count` pservers; trainers get `trainer_args`.
    pub fn start(
        master_count: usize,
        pserver_count: u32,
        dir: &Path,
        trainer_args: &[&str],
    ) -> Self {
        Self::start_with(master_count, pserver_count, dir, &[], trainer_args)
    }

    /// Like `start`, with `master_args` added to every master's flags.
    pub fn start_with(
        master_count: usize,
        pserver_count: u32,
        dir: &Path,
        master_args: &[&str],
        trainer_args: &[&str],
    ) -> Self {
        Self::start_with_env(master_count, pserver_count, dir, (master_args, &[]), trainer_args)
    }

    /// Like `start_with`, with `(index, name, value)` environment variables for single masters.
    pub fn start_with_env(
        master_count: usize,
        pserver_count: u32,
        dir: &Path,
        (master_args, master_envs): (&[&str], &[(usize, &str, &str)]),
        trainer_args: &[&str],
    ) -> Self {
        // Short leases, unless `master_args` names its own.
        let defaults = [
            ("--pserver-lease-ms", "2000"),
            ("--trainer-lease-ms", "3000"),
            ("--task-timeout-min-ms", "3000"),
        ];
        let mut args: Vec<&str> = defaults
            .iter()
            .filter(|(flag, _)| !master_args.contains(flag))
            .flat_map(|(flag, value)| [*flag, *value])
            .collect();
        args.extend(master_args);
        let masters = MasterGroup::start_with_env(master_count, &args, master_envs);
        let mut pservers = PServerProcesses::new(&masters.addrs, dir, pserver_count);
        for _ in 0..pserver_count {
            pservers.spawn();
        }
        let trainer_args = trainer_args.iter().map(|arg| arg.to_string()).collect();
        Self { masters, pservers, dir: dir.to_path_buf(), trainer_args, trainers: Vec::new() }
    }

    /// Starts one more trainer; `model_out` is where it writes the model.
    pub fn spawn_trainer(&mut self) -> usize {
        self.spawn_trainer_with(&[])
    }

    /// Starts one more trainer with `extra` flags after the job's own.
    pub fn spawn_trainer_with(&mut self, extra: &[&str]) -> usize {
        self.spawn_trainer_in(Command::new(env!("CARGO_BIN_EXE_raftrain")), extra)
    }

    /// Starts one more trainer that sees `replacement` at the path `original`: a bind mount in
    /// a mount namespace of its own (`unshare`), so only this trainer's view of the file is
    /// broken; `envs` are set for it alone. Needs root; see [`mount_namespaces_work`].
    pub fn spawn_trainer_seeing(
        &mut self,
        original: &Path,
        replacement: &Path,
        envs: &[(&str, &str)],
    ) -> usize {
        let mut command = Command::new("unshare");
        command
            .envs(envs.iter().copied())
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount --bind "$1" "$2" && shift 2 && exec "$@""#)
            .arg("sh")
            .arg(replacement)
            .arg(original)
            .arg(env!("CARGO_BIN_EXE_raftrain"));
        self.spawn_trainer_in(command, &[])
    }

    fn spawn_trainer_in(&mut self, mut command: Command, extra: &[&str]) -> usize {
        let index = self.trainers.len();
        let log = std::fs::File::create(self.trainer_log_path(index)).expect("create the log");
        let model_out = self.model_path(index).display().to_string();
        let child = command
            .args([
                "trainer",
                "--masters",
                &self.masters.addrs.join(","),
                "--model-out",
                &model_out,
            ])
            .args(&self.trainer_args)
            .args(extra)
            .env("RAFTRAIN_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("start raftrain trainer");
        self.trainers.push(Some(child));
        index
    }

    /// Trainer `index`'s exit code if it exited (it is then no longer waited for), `None` while
    /// it runs.
    pub fn trainer_exit(&mut self, index: usize) -> Option<i32> {
        let child = self.trainers[index].as_mut()?;
        let status = child.try_wait().expect("poll the trainer")?;
        self.trainers[index] = None;
        Some(status.code().unwrap_or(-1))
    }

    /// Sends `signal` to trainer `index` (SIGTERM asks it to stop).
    pub fn signal_trainer(&self, index: usize, signal: nix::sys::signal::Signal) {
        let child = self.trainers[index].as_ref().expect("the trainer runs");
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal the trainer");
    }

    pub fn trainer_log(&self, index: usize) -> String {
        std::fs::read_to_string(self.trainer_log_path(index)).unwrap_or_default()
    }

    pub fn kill_trainer(&mut self, index: usize) {
        if let Some(mut child) = self.trainers[index].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits for trainer `index` to exit, whatever its status; its status and its log.
    pub fn wait_trainer(&mut self, index: usize, timeout: Duration) -> (ExitStatus, String) {
        let deadline = std::time::Instant::now() + timeout;
        let mut child = self.trainers[index].take().expect("the trainer is running");
        loop {
            if let Some(status) = child.try_wait().expect("poll") {
                let log = std::fs::read_to_string(self.trainer_log_path(index)).unwrap_or_default();
                return (status, log);
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                panic!("trainer {index} did not exit in {timeout:?}\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for every running trainer to exit; each must succeed. Their standard outputs.
    pub fn wait_trainers(&mut self, timeout: Duration) -> Vec<String> {
        let deadline = std::time::Instant::now() + timeout;
        let mut outputs = Vec::new();
        for index in 0..self.trainers.len() {
            let Some(mut child) = self.trainers[index].take() else { continue };
            loop {
                if let Some(status) = child.try_wait().expect("poll") {
                    let mut stdout = String::new();
                    std::io::Read::read_to_string(
                        &mut child.stdout.take().expect("piped"),
                        &mut stdout,
                    )
                    .expect("read stdout");
                    assert!(status.success(), "trainer {index} failed ({status})\n{}", self.logs());
                    outputs.push(stdout);
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    let _ = child.kill();
                    panic!("trainer {index} did not finish in {timeout:?}\n{}", self.logs());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        outputs
    }

    pub fn model_path(&self, index: usize) -> PathBuf {
        self.dir.join(format!("model-{index}.safetensors"))
    }

    fn trainer_log_path(&self, index: usize) -> PathBuf {
        self.dir.join(format!("trainer-{index}.log"))
    }

    pub fn logs(&self) -> String {
        let trainers: String = (0..self.trainers.len())
            .map(|index| {
                format!(
                    "--- trainer {index}\n{}",
                    std::fs::read_to_string(self.trainer_log_path(index)).unwrap_or_default()
                )
            })
            .collect();
        format!("{trainers}{}{}", self.pservers.logs(), self.masters.logs())
    }
}

impl Drop for TrainingJob {
    fn drop(&mut self) {
        for index in 0..self.trainers.len() {
            self.kill_trainer(index);
        }
    }
}

/// Whether this process can give a child a mount namespace with a bind mount of its own (root
/// and `unshare`): tried on two scratch files, so a test that needs it can say it is skipped.
pub fn mount_namespaces_work(dir: &Path) -> bool {
    let (original, replacement) = (dir.join("probe-original"), dir.join("probe-replacement"));
    let written = std::fs::write(&original, "original").is_ok()
        && std::fs::write(&replacement, "replacement").is_ok();
    let output = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$1" "$2" && cat "$2""#)
        .arg("sh")
        .arg(&replacement)
        .arg(&original)
        .output();
    written && output.is_ok_and(|output| output.status.success() && output.stdout == b"replacement")
}
