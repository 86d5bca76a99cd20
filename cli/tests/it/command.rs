//! Runs the built `raftrain` binary with arguments and standard input, capturing its output.

use std::io::Write as _;
use std::process::{Command, Stdio};

pub struct Output {
    pub success: bool,
    /// The exit code (None when a signal ended the process).
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Output {
    pub fn stdout_text(&self) -> String {
        String::from_utf8(self.stdout.clone()).expect("test output is UTF-8")
    }
}

/// Runs `raftrain ARGS` with `stdin` piped in and waits for it.
pub fn raftrain(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(args)
        .env("RAFTRAIN_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start raftrain");
    let mut input = child.stdin.take().expect("stdin is piped");
    input.write_all(stdin).expect("write stdin");
    drop(input);
    let output = child.wait_with_output().expect("wait for raftrain");
    Output {
        success: output.status.success(),
        code: output.status.code(),
        stdout: output.stdout,
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// Like `raftrain`, but the command must succeed; returns standard output as text.
pub fn raftrain_ok(args: &[&str], stdin: &[u8]) -> String {
    let output = raftrain(args, stdin);
    assert!(output.success, "raftrain {args:?} failed: {}", output.stderr);
    output.stdout_text()
}
