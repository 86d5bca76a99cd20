//! Child `raftrain` processes for benchmarks and the demo: replicas on loopback ports that can
//! be killed with SIGKILL and restarted on their own data directories. All are killed when the
//! group is dropped, also on error or panic, and each child asks the kernel for SIGTERM when
//! its parent dies ([`exit_with_parent`]), so not even a SIGKILLed parent leaves orphans.

use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub(crate) struct ProcessGroup {
    exe: PathBuf,
    /// The arguments of each process, after the executable.
    commands: Vec<Vec<String>>,
    logs: Vec<PathBuf>,
    children: Vec<Option<Child>>,
}

impl ProcessGroup {
    /// Starts one `raftrain` process per argument list; each logs to
    /// `<log_dir>/process-<index>.log`.
    pub(crate) fn start(commands: Vec<Vec<String>>, log_dir: &Path) -> anyhow::Result<Self> {
        let names = (0..commands.len()).map(|index| format!("process-{index}")).collect();
        Self::start_named(commands, names, log_dir)
    }

    /// Like [`ProcessGroup::start`], each logging to `<log_dir>/<name>.log`.
    pub(crate) fn start_named(
        commands: Vec<Vec<String>>,
        names: Vec<String>,
        log_dir: &Path,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("find the raftrain executable")?;
        let logs = names.iter().map(|name| log_dir.join(format!("{name}.log"))).collect();
        let children = commands.iter().map(|_| None).collect();
        let mut group = Self { exe, commands, logs, children };
        for index in 0..group.commands.len() {
            group.spawn(index)?;
        }
        Ok(group)
    }

    pub(crate) fn spawn(&mut self, index: usize) -> anyhow::Result<()> {
        anyhow::ensure!(self.children[index].is_none(), "process {index} is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.logs[index])
            .with_context(|| format!("open {}", self.logs[index].display()))?;
        // Children log warnings unless RAFTRAIN_BENCH_LOG asks for more (a tracing filter).
        let filter = std::env::var("RAFTRAIN_BENCH_LOG").unwrap_or_else(|_| "warn".to_string());
        let child = Command::new(&self.exe)
            .args(&self.commands[index])
            .env("RAFTRAIN_LOG", filter)
            .env(EXIT_WITH_PARENT_ENV, std::process::id().to_string())
            // The child's stdin stays open while the group lives: a child may treat its end
            // (this process exiting, even by SIGKILL) as the signal to stop.
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {:?}", self.commands[index]))?;
        self.children[index] = Some(child);
        Ok(())
    }

    /// Replaces process `index`'s arguments for its next start.
    pub(crate) fn set_args(&mut self, index: usize, args: Vec<String>) {
        self.commands[index] = args;
    }

    /// SIGKILL and reap; nothing is flushed that was not already synced.
    pub(crate) fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.children[index].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM to every process at once, then SIGKILL to those still running after `grace`.
    pub(crate) fn terminate_all(&mut self, grace: std::time::Duration) {
        for child in self.children.iter().flatten() {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        let deadline = std::time::Instant::now() + grace;
        for index in 0..self.children.len() {
            let Some(child) = &mut self.children[index] else { continue };
            while std::time::Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            self.kill(index);
        }
    }

    /// The exit status of process `index` if it has exited (it stays recorded as exited).
    pub(crate) fn exit_status(
        &mut self,
        index: usize,
    ) -> anyhow::Result<Option<std::process::ExitStatus>> {
        match &mut self.children[index] {
            Some(child) => Ok(child.try_wait()?),
            None => Ok(None),
        }
    }

    pub(crate) fn log_path(&self, index: usize) -> &Path {
        &self.logs[index]
    }

    pub(crate) fn len(&self) -> usize {
        self.children.len()
    }

    pub(crate) fn pid(&self, index: usize) -> Option<u32> {
        self.children[index].as_ref().map(Child::id)
    }

    /// Fails, with the end of its log, if any process has exited on its own.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        for (index, child) in self.children.iter_mut().enumerate() {
            let Some(child) = child else { continue };
            if let Some(status) = child.try_wait()? {
                let log = std::fs::read_to_string(&self.logs[index]).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                anyhow::bail!("process {index} exited with {status}:\n{}", tail.join("\n"));
            }
        }
        Ok(())
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        for index in 0..self.children.len() {
            self.kill(index);
        }
    }
}

/// Runs this executable once with `args` (a tool step such as `recordio synth`) and waits for
/// it; its standard output is discarded, its errors name the step.
pub(crate) fn run_raftrain(args: &[String]) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("find the raftrain executable")?;
    let status = Command::new(exe)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("run raftrain {}", args.join(" ")))?;
    anyhow::ensure!(status.success(), "raftrain {} failed ({status})", args.join(" "));
    Ok(())
}

/// Set on a child to its parent's pid: the child then asks for SIGTERM when the parent dies.
const EXIT_WITH_PARENT_ENV: &str = "RAFTRAIN_EXIT_WITH_PARENT";

/// In a child started by a [`ProcessGroup`]: asks the kernel for SIGTERM (a graceful stop) when
/// the parent dies, and stops at once if it already has (the parent is no longer the one that
/// started us).
pub(crate) fn exit_with_parent() {
    let Some(parent) =
        std::env::var(EXIT_WITH_PARENT_ENV).ok().and_then(|pid| pid.parse::<i32>().ok())
    else {
        return;
    };
    if let Err(error) = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM) {
        tracing::warn!(%error, "cannot ask to be stopped with the parent process");
    }
    if nix::unistd::getppid().as_raw() != parent {
        tracing::warn!(parent, "the parent process is gone; stopping");
        std::process::exit(1);
    }
}

/// Loopback addresses with ports the kernel just handed out (and that are free again now).
pub(crate) fn free_loopback_addrs(count: usize) -> anyhow::Result<Vec<String>> {
    let listeners: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .context("bind a loopback port")?;
    listeners.iter().map(|listener| Ok(listener.local_addr()?.to_string())).collect()
}

/// The resident memory of a process, from `/proc/<pid>/status`.
pub(crate) fn resident_bytes(pid: u32) -> anyhow::Result<u64> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).context("read /proc status")?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).context("no VmRSS line")?;
    let kib: u64 = line.split_whitespace().nth(1).context("no VmRSS value")?.parse()?;
    Ok(kib * 1024)
}

/// The bytes of every file below `path`.
pub(crate) fn directory_bytes(path: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(path).with_context(|| format!("list {}", path.display()))? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        total += if metadata.is_dir() { directory_bytes(&entry.path())? } else { metadata.len() };
    }
    Ok(total)
}

/// The `quantile` of sorted durations, in milliseconds (nearest rank).
pub(crate) fn percentile_ms(sorted: &[std::time::Duration], quantile: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * quantile).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}
