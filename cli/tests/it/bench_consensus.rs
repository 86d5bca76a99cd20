//! `raftrain bench consensus` end to end on a short run: three real node processes, unary and
//! streamed clients, writers inside the leader, and the table it prints.

use crate::command::{raftrain, raftrain_ok};

/// Every asked-for row is measured and printed, with the disk the nodes used.
#[test]
fn bench_consensus_prints_a_row_per_client_count_and_rpc() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let dir = dir.path().to_str().expect("a UTF-8 path");
    let args =
        ["bench", "consensus", "--seconds", "1", "--clients", "2", "--in-process", "3", "--dir"];
    let stdout = raftrain_ok(&[&args[..], &[dir]].concat(), b"");
    for label in ["raw sled fsync (1 writer)", "2 unary", "2 stream", "3 in the leader"] {
        let row = stdout
            .lines()
            .find(|line| line.split('|').nth(1).map(str::trim) == Some(label))
            .unwrap_or_else(|| panic!("no row {label:?} in:\n{stdout}"));
        let writes: u64 =
            row.split('|').nth(2).and_then(|cell| cell.trim().parse().ok()).expect("a count");
        assert!(writes > 0, "row {label:?} committed no write: {row}");
    }
    assert!(stdout.contains("disk used by 3 nodes"), "{stdout}");
    assert!(stdout.contains("largest data directory"), "{stdout}");
}

/// A bad `--rpc` is refused by name before any process starts.
#[test]
fn bench_consensus_refuses_an_unknown_rpc() {
    let output = raftrain(&["bench", "consensus", "--rpc", "carrier-pigeon"], b"");
    assert!(!output.success);
    assert!(output.stderr.contains("--rpc"), "{}", output.stderr);
}
