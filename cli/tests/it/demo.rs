//! `raftrain demo` end to end: the whole job through its three faults, accuracy within 2 points
//! of the single-process run it reports beside it; with `--secure`, every process on TLS and
//! the token; and SIGTERM stops every child it started.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn the_demo_trains_through_its_faults() {
    let output = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["demo", "--examples", "30000", "--passes", "3"])
        .env("RAFTRAIN_LOG", "warn")
        .output()
        .expect("run the demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("job finished"), "{stdout}");
    for fault in ["the master leader", "trainer 0", "pserver 0"] {
        let line = stdout.lines().find(|line| {
            line.starts_with("fault: kill -9")
                && line.contains(fault)
                && line.contains("completing again after")
        });
        assert!(line.is_some_and(|line| !line.contains("not seen")), "{fault} recovered: {stdout}");
    }
    let points: f64 = stdout
        .split(" points)")
        .next()
        .and_then(|before| before.rsplit('(').next())
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no accuracy comparison in {stdout}"));
    assert!(points.abs() <= 2.0, "within 2 points of one process: {stdout}");
}

/// `demo --jobs 2`: two jobs on one master group, each with its own data, pservers and
/// trainers, shown side by side; both finish through the faults, each within 2 points of one
/// process on its own data.
#[test]
fn two_demo_jobs_train_side_by_side() {
    let output = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["demo", "--jobs", "2", "--examples", "20000", "--passes", "2", "--trainers", "2"])
        .env("RAFTRAIN_LOG", "warn")
        .output()
        .expect("run the demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("all 2 jobs finished"), "{stdout}");
    for job in ["job-1", "job-2"] {
        let result = stdout.lines().skip_while(|line| !line.starts_with(&format!("job {job}:")));
        let accuracy = result.clone().nth(1).unwrap_or_else(|| panic!("{job}: {stdout}"));
        let points: f64 = accuracy
            .split(" points)")
            .next()
            .and_then(|before| before.rsplit('(').next())
            .and_then(|number| number.parse().ok())
            .unwrap_or_else(|| panic!("{job}: no accuracy comparison in {stdout}"));
        assert!(points.abs() <= 2.0, "{job} within 2 points of one process: {stdout}");
    }
}

/// `demo --secure`: a throwaway CA and token, every master, pserver and trainer (and the demo's
/// own client) on TLS with the token, and the job still trains; the logs show the servers
/// refused nothing of their own cluster. With `--keep` it prints the dashboard's `https://`
/// address, keeps it up after the run (its view, over TLS, names the leader) until SIGINT,
/// then stops every child and keeps the work directory.
#[test]
fn the_secure_demo_trains_over_tls_with_the_token() {
    let mut demo = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["demo", "--secure", "--no-faults", "--keep", "--examples", "20000", "--passes", "1"])
        .env("RAFTRAIN_LOG", "warn")
        .env("RAFTRAIN_BENCH_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the demo");
    let mut lines = BufReader::new(demo.stdout.take().expect("piped")).lines();
    // With --keep the demo waits for Ctrl-C: a failing check must not leave it running.
    let mut demo = KilledOnDrop(demo);
    let demo = &mut demo.0;
    let mut stdout = String::new();
    for line in lines.by_ref().map_while(Result::ok) {
        stdout.push_str(&line);
        stdout.push('\n');
        if line.starts_with("dashboard kept up") {
            break;
        }
    }
    assert!(stdout.contains("job finished"), "{stdout}");
    let work = stdout
        .lines()
        .find_map(|line| line.strip_prefix("raftrain demo: work directory "))
        .unwrap_or_else(|| panic!("no work directory in {stdout}"));
    let dashboard = stdout
        .lines()
        .find_map(|line| line.strip_prefix("dashboard: https://"))
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no https dashboard address in {stdout}"));
    let ca = std::path::Path::new(work).join("secure/ca.pem");
    let view = crate::dashboard_tls::https_get(dashboard, &ca, "/api/v1/view");
    assert!(view.starts_with("HTTP/1.1 200") && view.contains("\"leader\":"), "{view}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(demo.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("interrupt the demo");
    stdout.extend(lines.map_while(Result::ok).map(|line| line + "\n"));
    let status = demo.wait().expect("wait for the demo");
    assert!(status.success(), "{stdout}");
    let kept = stdout
        .lines()
        .find_map(|line| line.strip_prefix("work directory kept: "))
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no kept directory in {stdout}"));
    let kept = std::path::Path::new(kept);
    for file in ["ca.pem", "node.pem", "node.key", "token"] {
        assert!(kept.join("secure").join(file).is_file(), "{file} written");
    }
    let master_log = std::fs::read_to_string(kept.join("logs/master-1.log")).expect("a master log");
    assert!(master_log.contains("tls=true token=true"), "{master_log}");
    let _ = std::fs::remove_dir_all(kept);
}

/// A child process killed (SIGKILL; its own children die with it) when the test lets go of it.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The pids of `pid`'s children.
fn children(pid: u32) -> Vec<i32> {
    let list =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    list.split_whitespace().filter_map(|pid| pid.parse().ok()).collect()
}

fn alive(pid: i32) -> bool {
    // A zombie still has a /proc entry; its state is Z.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}

/// Starts a long demo and waits until its 8 children run; the demo, their pids, and its work
/// directory (an interrupted demo keeps it, with its logs: the test removes it).
fn running_demo() -> (std::process::Child, Vec<i32>, WorkDir) {
    let mut demo = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["demo", "--no-faults", "--examples", "100000", "--passes", "100"])
        .env("RAFTRAIN_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the demo");
    let mut lines = BufReader::new(demo.stdout.take().expect("piped")).lines();
    let first = lines.next().and_then(Result::ok).unwrap_or_default();
    let work = first.strip_prefix("raftrain demo: work directory ").expect("the work directory");
    let work = WorkDir(work.into());
    let started =
        lines.by_ref().map_while(Result::ok).any(|line| line.starts_with("started 3 masters"));
    assert!(started, "the demo started its cluster");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut spawned = children(demo.id());
    while spawned.len() < 8 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        spawned = children(demo.id());
    }
    assert_eq!(spawned.len(), 8, "3 masters, 2 pservers, 3 trainers");
    (demo, spawned, work)
}

/// A demo's work directory, removed when the test is done with it.
struct WorkDir(std::path::PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits up to 30 s for every pid to be gone; those still running. A stopping master may take
/// its bounds in turn (a leader's handoff 3 s, its calls' drain 3 s, then its log's flush), and
/// every child of the demo stops at once on a machine running the rest of the suite: a bound
/// of 10 s was once passed there by a child still stopping.
fn survivors(pids: Vec<i32>) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut left = pids;
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left.retain(|&pid| alive(pid));
    }
    left
}

/// Fails naming each child of the demo still running (its command line, state and kernel wait
/// channel) with the tail of every log of the demo, after killing those children: a failed run
/// leaves no process behind and says which one did not stop, and where it was.
fn assert_no_survivors(left: Vec<i32>, work: &WorkDir) {
    if left.is_empty() {
        return;
    }
    let described: Vec<String> = left.iter().map(|&pid| describe(pid)).collect();
    for &pid in &left {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    panic!(
        "children left running 30 s after the demo ended:\n{}\n{}",
        described.join("\n"),
        log_tails(work)
    );
}

/// A process's command line, state and wait channel, from /proc.
fn describe(pid: i32) -> String {
    let read =
        |name: &str| std::fs::read_to_string(format!("/proc/{pid}/{name}")).unwrap_or_default();
    let command = read("cmdline").replace('\0', " ");
    let state = read("status")
        .lines()
        .find(|line| line.starts_with("State:"))
        .unwrap_or_default()
        .to_string();
    format!("pid {pid}: {} ({state}, waiting in {})", command.trim(), read("wchan"))
}

/// The last lines of each of the demo's logs.
fn log_tails(work: &WorkDir) -> String {
    let Ok(entries) = std::fs::read_dir(work.0.join("logs")) else {
        return "no logs".to_string();
    };
    let mut tails = Vec::new();
    for entry in entries.flatten() {
        let log = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(15)..].join("\n");
        tails.push(format!("--- {}:\n{tail}", entry.path().display()));
    }
    tails.join("\n")
}

#[test]
fn sigterm_stops_the_demo_and_every_child() {
    let (mut demo, spawned, work) = running_demo();
    let pid = nix::unistd::Pid::from_raw(demo.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal the demo");
    let status = demo.wait().expect("the demo exits");
    assert!(!status.success(), "an interrupted demo reports it");
    assert_no_survivors(survivors(spawned), &work);
    assert!(work.0.join("logs").is_dir(), "an interrupted demo keeps its logs");
}

/// Even a SIGKILLed demo leaves no orphans: each child asked the kernel for SIGTERM when its
/// parent dies.
#[test]
fn sigkill_of_the_demo_leaves_no_orphans() {
    let (mut demo, spawned, work) = running_demo();
    demo.kill().expect("kill -9 the demo");
    let _ = demo.wait();
    assert_no_survivors(survivors(spawned), &work);
}
