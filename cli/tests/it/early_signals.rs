//! A SIGTERM that comes while a server is still starting, before it listens for the signal, is
//! received once it listens: the server stops gracefully (exit 0, "terminated" in its log)
//! instead of being killed mid-start or, as happened to a demo's children SIGTERMed by their
//! parent's death, losing the signal to a half-installed handler and running on. Each server
//! here starts with SIGTERM blocked and already pending (both survive exec): the signal waits
//! for the server to release it, which it does only once its listener is registered.

use std::os::unix::process::ExitStatusExt as _;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::master_group::free_loopback_addr;

/// How long a signalled server may take to stop (its graceful bounds, on a loaded machine).
const STOP_WAIT: Duration = Duration::from_secs(60);

/// Blocks SIGTERM, sends it to itself (it stays pending), then execs its arguments: Perl,
/// because the workspace forbids the `unsafe` of a `pre_exec` (and Debian always has it).
const EXEC_WITH_SIGTERM_PENDING: &str = "use POSIX; \
    sigprocmask(SIG_BLOCK, POSIX::SigSet->new(SIGTERM)) or die \"sigprocmask: $!\"; \
    kill(\"TERM\", $$); exec { $ARGV[0] } @ARGV or die \"exec: $!\"";

/// Starts `raftrain args` with a SIGTERM already sent and blocked, logging to `log`.
fn start_with_sigterm_pending(args: &[&str], log: &std::path::Path) -> Child {
    let log = std::fs::File::create(log).expect("create the log");
    Command::new("perl")
        .args(["-e", EXEC_WITH_SIGTERM_PENDING, "--", env!("CARGO_BIN_EXE_raftrain")])
        .args(args)
        .env("RAFTRAIN_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start raftrain through perl")
}

/// Waits up to `STOP_WAIT` for `child` to exit; its status, or `None` (it is then killed).
fn exit_status(child: &mut Child) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + STOP_WAIT;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("wait for the server") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// Starts a server with SIGTERM pending and checks that it stops gracefully.
fn stops_on_an_early_sigterm(role: &str, args: &[&str]) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = dir.path().join(format!("{role}.log"));
    let mut server = start_with_sigterm_pending(args, &log);
    let status = exit_status(&mut server);
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let status = status.unwrap_or_else(|| panic!("the {role} ran on after SIGTERM:\n{logged}"));
    assert_eq!(status.signal(), None, "the {role} was killed by the signal, not stopped by it");
    assert!(status.success(), "the {role} stopped with {status}:\n{logged}");
    assert!(logged.contains("terminated"), "the {role} says it was terminated:\n{logged}");
}

#[test]
fn an_early_sigterm_stops_a_master_gracefully() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let listen = free_loopback_addr();
    let peers = format!("1={listen}");
    let data = dir.path().join("master-1").display().to_string();
    let args = ["master", "--id", "1", "--listen", &listen, "--peers", &peers, "--data-dir", &data];
    stops_on_an_early_sigterm("master", &args);
}

#[test]
fn an_early_sigterm_stops_a_pserver_gracefully() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (masters, listen) = (free_loopback_addr(), free_loopback_addr());
    let checkpoints = dir.path().join("checkpoints").display().to_string();
    let args = [
        "pserver",
        "--masters",
        &masters,
        "--listen",
        &listen,
        "--num-pservers",
        "1",
        "--checkpoint-dir",
        &checkpoints,
    ];
    stops_on_an_early_sigterm("pserver", &args);
}

#[test]
fn an_early_sigterm_stops_a_trainer_gracefully() {
    let masters = free_loopback_addr();
    let args = ["trainer", "--masters", &masters, "--model", "softmax", "--classes", "3"];
    stops_on_an_early_sigterm("trainer", &args);
}
