//! Logs: `--log-format json` writes one flat JSON object per line (the event's fields at the
//! top level, with the process's role and id); text logs carry no colour codes when standard
//! error is not a terminal; openraft's INFO lines are off by default, and a master whose
//! peers are down logs each once, not every election.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::master_group::free_loopback_addr;

/// A one-master group's first second of standard error, with `extra` flags.
fn master_log(extra: &[&str]) -> String {
    let addr = free_loopback_addr();
    master_log_of(&addr, &format!("1={addr}"), extra, Duration::from_secs(1))
}

/// The standard error of master 1 of `peers` (listening at `addr`) over its first `running`.
fn master_log_of(addr: &str, peers: &str, extra: &[&str], running: Duration) -> String {
    let dir = tempfile::tempdir().expect("temp");
    let child = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["master", "--id", "1", "--listen", addr, "--peers", peers])
        .args(["--data-dir", &dir.path().display().to_string()])
        .args(extra)
        .env_remove("RAFTRAIN_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start a master");
    std::thread::sleep(running);
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("stop it");
    let output = child.wait_with_output().expect("wait");
    String::from_utf8(output.stderr).expect("UTF-8 logs")
}

#[test]
fn json_logs_are_one_object_per_line_and_text_logs_have_no_colour_in_a_pipe() {
    let json = master_log(&["--log-format", "json"]);
    assert!(json.lines().count() >= 2, "{json}");
    for line in json.lines() {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|error| panic!("{line}: {error}"));
        assert!(object["level"].is_string() && object["message"].is_string(), "{line}");
        assert!(object.get("fields").is_none(), "event fields are flattened: {line}");
        assert_eq!((object["role"].as_str(), object["id"].as_str()), (Some("master"), Some("1")));
    }
    let serving = json
        .lines()
        .find(|line| line.contains("\"master serving\""))
        .unwrap_or_else(|| panic!("no serving line: {json}"));
    assert_eq!(serving.matches("\"id\":").count(), 1, "no key twice: {serving}");
    let serving: serde_json::Value = serde_json::from_str(serving).expect("JSON");
    assert_eq!(serving["target"], "master::run", "{serving}");
    assert_eq!(serving["tls"], false, "an event field at the top level: {serving}");
    let text = master_log(&[]);
    assert!(text.contains("master serving") && !text.contains('\u{1b}'), "{text}");
    assert!(!text.contains("openraft::"), "openraft INFO is off by default: {text}");
}

/// A master whose two peers are down campaigns every election timeout; each peer is logged
/// unreachable once, and openraft's error line for each failed vote request is dropped (it
/// wrote about 14 KB a second, two lines a peer every election).
#[test]
fn a_master_whose_peers_are_down_logs_each_once() {
    let addrs = [free_loopback_addr(), free_loopback_addr(), free_loopback_addr()];
    let peers = format!("1={},2={},3={}", addrs[0], addrs[1], addrs[2]);
    let log = master_log_of(&addrs[0], &peers, &[], Duration::from_secs(4));
    assert_eq!(log.matches("peer unreachable").count(), 2, "{log}");
    assert!(!log.contains("while requesting vote") && !log.contains("ERROR"), "{log}");
    assert!(log.lines().count() < 20, "{log}");
}
