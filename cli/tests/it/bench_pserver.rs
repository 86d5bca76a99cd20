//! `raftrain bench pserver` on its smallest run keeps standard output for its tables: its own
//! INFO lines go to standard error and its master and pserver processes' to the files it names
//! there, kept after the run.

use std::process::{Command, Stdio};

/// With every log at INFO, standard output holds only the three tables' lines (throughput with
/// its spread over runs, checkpoints warm and cold, replacements) (and the blank
/// lines between them), and the named log directory holds each process's non-empty log.
#[test]
fn bench_pserver_prints_only_tables_on_stdout() {
    let dir = tempfile::tempdir().expect("temp");
    let logs = dir.path().join("logs");
    let args = ["bench", "pserver", "--params", "1000", "--pservers", "1", "--rounds", "1"];
    let output = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(args)
        .args(["--runs", "2", "--checkpoint-params", "1000", "--checkpoint-runs", "2"])
        .args(["--replacements", "1", "--replacement-params", "300000"])
        .args(["--log-dir", &logs.display().to_string()])
        .env("RAFTRAIN_LOG", "info")
        .env("RAFTRAIN_BENCH_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .expect("run the benchmark");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    let table_lines = stdout.lines().filter(|line| !line.is_empty()).count();
    assert!(table_lines >= 3 * 3, "three tables of a header, a rule and rows:\n{stdout}");
    for line in stdout.lines().filter(|line| !line.is_empty()) {
        assert!(line.starts_with('|') && line.ends_with('|'), "not a table line: {line:?}");
    }
    for column in ["vs raw TCP min / median / max", "restore cold s", "kill -9 to serving (ms)"] {
        assert!(stdout.contains(column), "no {column:?} column:\n{stdout}");
    }
    assert!(stderr.contains(&format!("the processes' logs are in {}", logs.display())), "{stderr}");
    let mut process_logs = Vec::new();
    for cluster in std::fs::read_dir(&logs).expect("the log directory is kept") {
        for log in std::fs::read_dir(cluster.expect("an entry").path()).expect("a cluster's logs") {
            process_logs.push(log.expect("an entry").path());
        }
    }
    // One master and one pserver, then one master and two pservers for the replacements.
    assert_eq!(process_logs.len(), 5, "{process_logs:?}");
    for log in process_logs {
        let text = std::fs::read_to_string(&log).expect("a readable log");
        assert!(text.contains(" INFO "), "{}: {text}", log.display());
    }
}
