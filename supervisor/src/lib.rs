//! `ProcessGroup`: the one supervisor of child `raftrain` processes in the workspace (the
//! fault harness, the demo and the benchmarks): start named processes, each logging to its own
//! file, kill -9, pause and resume them, restart them with the same or new arguments, stop
//! all, stop one gracefully (SIGTERM, then SIGKILL after a bound). Every exit is recorded with
//! its status and whether the group caused it ([`ProcessExit`]). Every process is killed when the group is dropped, also on error or panic, and each
//! child asks the kernel for SIGTERM when its parent dies ([`exit_with_parent`]), so not even a
//! SIGKILLed parent leaves orphans.

use std::collections::VecDeque;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nix::sys::signal::Signal;
use serde::{Deserialize, Serialize};

mod loopback_ports;
pub use loopback_ports::{free_loopback_addr, free_loopback_addrs};

/// Set on a child to its parent's pid: the child then asks for SIGTERM when the parent dies.
const EXIT_WITH_PARENT_ENV: &str = "RAFTRAIN_EXIT_WITH_PARENT";
/// The tracing filter of children unless the group is given another.
const LOG_FILTER_DEFAULT: &str = "warn";
/// Exit records kept until someone takes them; older ones are dropped (a long demo that never
/// asks keeps only the latest).
const EXITS_KEPT_MAX: usize = 4_096;

/// Why a child exited, as far as the group knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cause", rename_all = "kebab-case")]
pub enum ExitCause {
    /// By itself: nobody here signalled it.
    Own,
    /// SIGKILL from the group ([`ProcessGroup::kill`]).
    Killed,
    /// SIGTERM from the group for this process alone ([`ProcessGroup::begin_stop`]): it exited
    /// `after_ms` later, or, `forced`, did not within the bound and was killed.
    Terminated { after_ms: u64, forced: bool },
    /// SIGTERM to every process at once at the end ([`ProcessGroup::terminate_all`]).
    Stopped { after_ms: u64, forced: bool },
}

/// One child's exit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessExit {
    pub name: String,
    /// The exit code, when it exited (not killed by a signal).
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    #[serde(flatten)]
    pub cause: ExitCause,
}

impl ProcessExit {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// One supervised process: how to start it and, while it runs, its handle.
struct Process {
    name: String,
    /// The program to run instead of the group's executable (e.g. `ip netns exec ...`).
    program: Option<PathBuf>,
    args: Vec<String>,
    /// Extra environment variables, set at every start.
    env: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
    /// Whether the running child's exit is already recorded (it is reaped later).
    exit_recorded: bool,
    /// When the group sent this child SIGTERM, if it did.
    stop_sent: Option<Instant>,
}

pub struct ProcessGroup {
    exe: PathBuf,
    log_dir: PathBuf,
    log_filter: String,
    processes: Vec<Process>,
    exits: VecDeque<ProcessExit>,
}

impl ProcessGroup {
    /// An empty group running `exe`, logging to `<log_dir>/<name>.log`.
    pub fn new(exe: PathBuf, log_dir: &Path) -> Self {
        Self {
            exe,
            log_dir: log_dir.to_path_buf(),
            log_filter: LOG_FILTER_DEFAULT.to_string(),
            processes: Vec::new(),
            exits: VecDeque::new(),
        }
    }

    /// Starts one process of this executable per argument list, `process-<index>` each.
    pub fn start(commands: Vec<Vec<String>>, log_dir: &Path) -> anyhow::Result<Self> {
        let names = (0..commands.len()).map(|index| format!("process-{index}")).collect();
        Self::start_named(commands, names, log_dir)
    }

    /// Starts one process of this executable per argument list, named `names`; the children
    /// log warnings unless `RAFTRAIN_BENCH_LOG` names another filter.
    pub fn start_named(
        commands: Vec<Vec<String>>,
        names: Vec<String>,
        log_dir: &Path,
    ) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("find the raftrain executable")?;
        let mut group = Self::new(exe, log_dir);
        if let Ok(filter) = std::env::var("RAFTRAIN_BENCH_LOG") {
            group.log_filter = filter;
        }
        for (args, name) in commands.into_iter().zip(names) {
            group.add(&name, args)?;
        }
        Ok(group)
    }

    /// Sets the children's `RAFTRAIN_LOG` filter from their next start.
    pub fn set_log_filter(&mut self, filter: &str) {
        self.log_filter = filter.to_string();
    }

    /// Adds and starts a process; its index is returned.
    pub fn add(&mut self, name: &str, args: Vec<String>) -> anyhow::Result<usize> {
        let index = self.add_stopped(name, args);
        self.spawn(index)?;
        Ok(index)
    }

    /// Adds a process without starting it (set its environment, then `spawn` it).
    pub fn add_stopped(&mut self, name: &str, args: Vec<String>) -> usize {
        let log = self.log_dir.join(format!("{name}.log"));
        let process = Process {
            name: name.to_string(),
            program: None,
            args,
            env: Vec::new(),
            log,
            child: None,
            exit_recorded: false,
            stop_sent: None,
        };
        self.processes.push(process);
        self.processes.len() - 1
    }

    /// Runs process `index` as `program` with its arguments instead of the group's executable.
    pub fn set_program(&mut self, index: usize, program: PathBuf) {
        self.processes[index].program = Some(program);
    }

    /// Runs process `index` as the group's executable again from its next start.
    pub fn reset_program(&mut self, index: usize) {
        self.processes[index].program = None;
    }

    /// Process `index`'s arguments.
    pub fn args(&self, index: usize) -> &[String] {
        &self.processes[index].args
    }

    /// Sets an environment variable of process `index` from its next start.
    pub fn set_env(&mut self, index: usize, name: &str, value: &str) {
        let env = &mut self.processes[index].env;
        env.retain(|(known, _)| known != name);
        env.push((name.to_string(), value.to_string()));
    }

    /// Starts process `index` (again) with its arguments; its log is appended to.
    pub fn spawn(&mut self, index: usize) -> anyhow::Result<()> {
        let process = &mut self.processes[index];
        anyhow::ensure!(process.child.is_none(), "{} is already running", process.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&process.log)
            .with_context(|| format!("open {}", process.log.display()))?;
        let program = process.program.as_ref().unwrap_or(&self.exe);
        let child = Command::new(program)
            .args(&process.args)
            .env("RAFTRAIN_LOG", &self.log_filter)
            .envs(process.env.iter().map(|(name, value)| (name, value)))
            .env(EXIT_WITH_PARENT_ENV, std::process::id().to_string())
            // The child's stdin stays open while the group lives: a child may treat its end
            // (this process exiting, even by SIGKILL) as the signal to stop.
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {} {:?}", self.exe.display(), process.args))?;
        process.child = Some(child);
        process.exit_recorded = false;
        process.stop_sent = None;
        Ok(())
    }

    /// Replaces process `index`'s arguments for its next start.
    pub fn set_args(&mut self, index: usize, args: Vec<String>) {
        self.processes[index].args = args;
    }

    /// SIGKILL and reap; nothing is flushed that was not already synced. A paused process
    /// dies all the same.
    pub fn kill(&mut self, index: usize) {
        let Some(mut child) = self.processes[index].child.take() else { return };
        let _ = child.kill();
        if let Ok(status) = child.wait() {
            // A child that had exited before the signal keeps its own status.
            let cause = match status.signal() {
                Some(signal) if signal == Signal::SIGKILL as i32 => ExitCause::Killed,
                _ => ExitCause::Own,
            };
            self.record_exit(index, status, cause);
        }
    }

    /// Records the exit of process `index` once per start.
    fn record_exit(&mut self, index: usize, status: ExitStatus, cause: ExitCause) {
        let process = &mut self.processes[index];
        if std::mem::replace(&mut process.exit_recorded, true) {
            return;
        }
        let exit = ProcessExit {
            name: process.name.clone(),
            code: status.code(),
            signal: status.signal(),
            cause,
        };
        if self.exits.len() == EXITS_KEPT_MAX {
            self.exits.pop_front();
        }
        self.exits.push_back(exit);
    }

    /// The exits recorded since the last call, oldest first.
    pub fn take_exits(&mut self) -> Vec<ProcessExit> {
        self.exits.drain(..).collect()
    }

    /// Starts a graceful stop of process `index`: SIGCONT (a paused process could not act on
    /// it), then SIGTERM. [`ProcessGroup::finish_stop`] sees it through.
    pub fn begin_stop(&mut self, index: usize) -> anyhow::Result<()> {
        self.signal(index, Signal::SIGCONT)?;
        self.signal(index, Signal::SIGTERM)?;
        self.processes[index].stop_sent = Some(Instant::now());
        Ok(())
    }

    /// After [`ProcessGroup::begin_stop`]: the exit if process `index` has exited; with
    /// `force`, SIGKILL if it has not (recorded as a forced stop). `None` while it still runs.
    pub fn finish_stop(&mut self, index: usize, force: bool) -> Option<ProcessExit> {
        let process = &mut self.processes[index];
        let sent = process.stop_sent?;
        let child = process.child.as_mut()?;
        let (status, forced) = match child.try_wait() {
            Ok(Some(status)) => (status, false),
            _ if force => {
                let _ = child.kill();
                (child.wait().ok()?, true)
            }
            _ => return None,
        };
        process.child = None;
        process.stop_sent = None;
        let after_ms = sent.elapsed().as_millis() as u64;
        // Already recorded means it exited by itself before it was asked to.
        let recorded = process.exit_recorded;
        self.record_exit(index, status, ExitCause::Terminated { after_ms, forced });
        if recorded {
            return None;
        }
        self.exits.back().cloned()
    }

    /// SIGSTOP: the process stops running (its sockets stay open, its peers time out).
    pub fn pause(&self, index: usize) -> anyhow::Result<()> {
        self.signal(index, Signal::SIGSTOP)
    }

    /// SIGCONT after [`ProcessGroup::pause`].
    pub fn resume(&self, index: usize) -> anyhow::Result<()> {
        self.signal(index, Signal::SIGCONT)
    }

    /// Sends `signal` to process `index`.
    pub fn signal(&self, index: usize, signal: Signal) -> anyhow::Result<()> {
        let pid =
            self.pid(index).with_context(|| format!("{} is not running", self.name(index)))?;
        let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).context("a pid fits in i32")?);
        nix::sys::signal::kill(pid, signal)
            .with_context(|| format!("{signal} {}", self.name(index)))
    }

    /// SIGTERM to every process at once, then SIGKILL to those still running after `grace`.
    /// Each exit is recorded as [`ExitCause::Stopped`].
    pub fn terminate_all(&mut self, grace: Duration) {
        for index in 0..self.processes.len() {
            let _ = self.signal(index, Signal::SIGCONT);
            let _ = self.signal(index, Signal::SIGTERM);
        }
        let sent = Instant::now();
        let deadline = sent + grace;
        for index in 0..self.processes.len() {
            let Some(child) = &mut self.processes[index].child else { continue };
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let forced = matches!(child.try_wait(), Ok(None));
            let _ = child.kill();
            let status = child.wait();
            self.processes[index].child = None;
            let after_ms = sent.elapsed().as_millis() as u64;
            if let Ok(status) = status {
                self.record_exit(index, status, ExitCause::Stopped { after_ms, forced });
            }
        }
    }

    /// The exit status of process `index` if it has exited (it stays recorded as exited).
    pub fn exit_status(
        &mut self,
        index: usize,
    ) -> anyhow::Result<Option<std::process::ExitStatus>> {
        let status = match &mut self.processes[index].child {
            Some(child) => child.try_wait()?,
            None => None,
        };
        if let Some(status) = status {
            self.record_exit(index, status, ExitCause::Own);
        }
        Ok(status)
    }

    /// Waits up to `timeout` for process `index` to exit by itself; its status, if it did
    /// (the process then counts as stopped and may be started again).
    pub fn wait_exit(
        &mut self,
        index: usize,
        timeout: Duration,
    ) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let child = self.processes[index].child.as_mut()?;
            if let Ok(Some(status)) = child.try_wait() {
                self.processes[index].child = None;
                self.record_exit(index, status, ExitCause::Own);
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn name(&self, index: usize) -> &str {
        &self.processes[index].name
    }

    pub fn log_path(&self, index: usize) -> &Path {
        &self.processes[index].log
    }

    pub fn len(&self) -> usize {
        self.processes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.processes.is_empty()
    }

    pub fn pid(&self, index: usize) -> Option<u32> {
        self.processes[index].child.as_ref().map(Child::id)
    }

    /// Fails, with the end of its log, if any process has exited on its own.
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        for index in 0..self.processes.len() {
            if let Some(status) = self.exit_status(index)? {
                let tail = log_tail(self.log_path(index), 20);
                anyhow::bail!("{} exited with {status}:\n{tail}", self.name(index));
            }
        }
        Ok(())
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        for index in 0..self.processes.len() {
            self.kill(index);
        }
    }
}

/// The last `lines` lines of a log file (empty if it cannot be read).
pub fn log_tail(path: &Path, lines: usize) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(lines).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// In a child started by a [`ProcessGroup`]: asks the kernel for SIGTERM (a graceful stop) when
/// the parent dies, and stops at once if it already has (the parent is no longer the one that
/// started us). A child that handles SIGTERM calls it only once its handler is wholly in
/// place: a signal that comes while the handler is being installed may be lost.
pub fn exit_with_parent() {
    let Some(parent) =
        std::env::var(EXIT_WITH_PARENT_ENV).ok().and_then(|pid| pid.parse::<i32>().ok())
    else {
        return;
    };
    if let Err(error) = nix::sys::prctl::set_pdeathsig(Signal::SIGTERM) {
        tracing::warn!(%error, "cannot ask to be stopped with the parent process");
    }
    if nix::unistd::getppid().as_raw() != parent {
        tracing::warn!(parent, "the parent process is gone; stopping");
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell_group(dir: &Path, scripts: &[&str]) -> anyhow::Result<ProcessGroup> {
        let mut group = ProcessGroup::new(PathBuf::from("/bin/sh"), dir);
        for (index, script) in scripts.iter().enumerate() {
            group.add(&format!("shell-{index}"), vec!["-c".into(), script.to_string()])?;
        }
        Ok(group)
    }

    /// A graceful stop reports the exit and how long it took; a process that ignores SIGTERM
    /// is killed at the bound and recorded as forced.
    #[test]
    fn graceful_stops_are_recorded_and_bounded() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut group = shell_group(dir.path(), &["sleep 30", "trap '' TERM; sleep 30"])?;
        // Let the second shell install its trap before the signal comes.
        std::thread::sleep(Duration::from_millis(300));
        group.begin_stop(0)?;
        group.begin_stop(1)?;
        std::thread::sleep(Duration::from_millis(300));
        let stopped = group.finish_stop(0, false).expect("sh exits on SIGTERM");
        assert_eq!(stopped.signal, Some(Signal::SIGTERM as i32), "{stopped:?}");
        assert!(matches!(stopped.cause, ExitCause::Terminated { forced: false, .. }));
        assert_eq!(group.finish_stop(1, false), None, "it ignores SIGTERM and still runs");
        let forced = group.finish_stop(1, true).expect("killed");
        assert!(matches!(forced.cause, ExitCause::Terminated { forced: true, .. }), "{forced:?}");
        assert_eq!(group.take_exits(), vec![stopped, forced]);
        Ok(())
    }

    /// A process's own exit is recorded once with its code, a kill -9 as killed, and the
    /// records are handed out once.
    #[test]
    fn own_exits_and_kills_are_recorded_once() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let mut group = shell_group(dir.path(), &["exit 3", "sleep 30"])?;
        let code = group.wait_exit(0, Duration::from_secs(10)).and_then(|status| status.code());
        assert_eq!(code, Some(3));
        group.kill(0);
        group.kill(1);
        let exits = group.take_exits();
        let causes: Vec<_> = exits.iter().map(|exit| (exit.code, exit.cause)).collect();
        assert_eq!(causes, [(Some(3), ExitCause::Own), (None, ExitCause::Killed)]);
        assert!(group.take_exits().is_empty());
        Ok(())
    }
}
