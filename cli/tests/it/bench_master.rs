//! `raftrain bench master` on its smallest run: the throughput table and the failover table
//! (one take-down of each kind, its probe walked to the job's pass first) against real master
//! processes.

use std::process::{Command, Stdio};

/// One dataset size, one client, one take-down of each kind: both tables print their rows, and
/// every failover is a time the probe measured (a number of milliseconds).
#[test]
fn bench_master_prints_throughput_and_failover_rows() {
    let output = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["bench", "master", "--tasks", "200", "--clients", "1", "--seconds", "1"])
        .args(["--failovers", "1", "--failover-clients", "2", "--no-etcd"])
        .stdin(Stdio::null())
        .output()
        .expect("run the benchmark");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stdout}\n{stderr}");
    for take_down in ["kill -9", "SIGTERM"] {
        let row = stdout
            .lines()
            .find(|line| line.starts_with('|') && line.contains(&format!(" {take_down} |")))
            .unwrap_or_else(|| panic!("no {take_down} row:\n{stdout}"));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(&cells[2..4], ["1", "2"], "{row}");
        assert!(cells[4].parse::<u64>().is_ok(), "a p50 in ms: {row}");
        let each = format!("each failover after {take_down}, sorted (ms): ");
        assert!(stdout.contains(&each), "{stdout}");
    }
}
