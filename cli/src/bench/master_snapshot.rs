//! Snapshot cost of a large master state, measured in process on the code a replica runs: the
//! state's encoding, then the snapshot file's gzip and checksum, and the way back.

use super::table::Table;
use consensus::snapshot_file::SnapshotContents;
use master::state::{ChunkRef, Command, MasterState, QueuePolicy, Request, Response};
use std::time::Instant;

/// Builds a state with `tasks` tasks and times its snapshot both ways.
pub(crate) fn measure(tasks: u64) -> anyhow::Result<Table> {
    let mut state = MasterState::new();
    let chunks: Vec<ChunkRef> = (0..tasks)
        .map(|task_id| ChunkRef {
            path: "/data/bench/dataset.recordio".into(),
            offset: task_id * 28,
            compressed_size: 8,
            record_count: 1,
        })
        .collect();
    let policy = QueuePolicy {
        chunks_per_task: 1,
        task_timeout_min_ms: 600_000,
        timeout_factor: 3,
        max_task_failures: 3,
        retry_failed_next_pass: false,
    };
    let command = Command::ReportDataset { job: "bench".into(), chunks, passes: 1, policy };
    let response = state.apply(&Request { client: None, now_ms: 0, term: None, command });
    anyhow::ensure!(
        matches!(response, Response::DatasetAccepted { .. }),
        "dataset refused: {response:?}"
    );
    let started = Instant::now();
    let contents = SnapshotContents { meta: Default::default(), state: state.encode() };
    let file = contents.encode()?;
    let encode = started.elapsed();
    let started = Instant::now();
    let decoded = SnapshotContents::decode(&file).map_err(anyhow::Error::msg)?;
    let restored = MasterState::decode(&decoded.state)?;
    let decode = started.elapsed();
    anyhow::ensure!(restored == state, "the snapshot did not restore the same state");
    let mut table = Table::new(&["tasks", "state MB", "file MB", "write ms", "restore ms"]);
    table.row(vec![
        tasks.to_string(),
        format!("{:.1}", contents.state.len() as f64 / 1e6),
        format!("{:.1}", file.len() as f64 / 1e6),
        format!("{:.0}", encode.as_secs_f64() * 1e3),
        format!("{:.0}", decode.as_secs_f64() * 1e3),
    ]);
    println!("snapshot of the master state (in process: encode + gzip + crc, and back with invariant checks)");
    Ok(table)
}
