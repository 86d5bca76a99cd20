//! `bench pserver`'s checkpoint rows: a pserver's checkpoint of N parameters written (stream,
//! fsync, rename, directory fsync) and restored (`read_checkpoint`: the frame, the body parsed
//! into blocks and hashed), against the same bytes written raw by the same durable-write
//! routine and read raw with one `read`, in the same run. Both reads run in a fresh process
//! (`bench read-file`), as a replacement pserver's restore does. They are timed warm (the file
//! read once before, untimed, so it is in the page cache) and cold (its pages dropped first with
//! `posix_fadvise(DONTNEED)`, which needs no privilege; the kernel may keep pages another
//! process maps, which no benchmark file is).

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use storage::checkpoint::{CheckpointDir, CheckpointHeader, ParamShape};
use storage::durable_file::write_durably;

use super::read_file::{read_in_child, ReadAs};
use super::spread::Spread;
use super::table::Table;

/// Elements per block, as a pserver's default layout has them.
const BLOCK_ELEMENTS: u32 = 65_536;

/// Seconds of one run of each measure.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    write: f64,
    raw_write: f64,
    warm_restore: f64,
    warm_raw_read: f64,
    cold_restore: f64,
    cold_raw_read: f64,
}

/// The checkpoint table: per size in `params`, the median of `runs` runs of each measure and
/// the ratios of the medians.
pub(crate) fn checkpoint_table(root: &Path, params: &[u64], runs: u32) -> anyhow::Result<Table> {
    let mut table = Table::new(&[
        "checkpoint of",
        "bytes",
        "runs",
        "write+fsync s",
        "raw s",
        "vs raw",
        "restore warm s",
        "raw read s",
        "vs raw",
        "restore cold s",
        "raw read s",
        "vs raw",
    ]);
    for &count in params {
        let dir = CheckpointDir::open(&root.join(format!("checkpoint-bench-{count}")))?;
        let values = vec![0.25_f32; count as usize];
        let mut measured = Vec::new();
        let mut bytes = 0;
        for run in 0..runs.max(1) {
            let (one, file_bytes) = measure(&dir, &values, u64::from(run) + 1)?;
            tracing::info!(params = count, ?one, "checkpoint run");
            measured.push(one);
            bytes = file_bytes;
        }
        let median = |pick: fn(&Run) -> f64| {
            Spread::of(&measured.iter().map(pick).collect::<Vec<_>>()).median
        };
        let pair =
            |ours: f64, raw: f64| [format!("{ours:.2}"), format!("{raw:.2}"), ratio(ours, raw)];
        let mut cells = vec![count.to_string(), bytes.to_string(), runs.max(1).to_string()];
        cells.extend(pair(median(|run| run.write), median(|run| run.raw_write)));
        cells.extend(pair(median(|run| run.warm_restore), median(|run| run.warm_raw_read)));
        cells.extend(pair(median(|run| run.cold_restore), median(|run| run.cold_raw_read)));
        table.row(cells);
    }
    Ok(table)
}

fn ratio(ours: f64, raw: f64) -> String {
    match raw > 0.0 {
        true => format!("{:.2}x", ours / raw),
        false => "-".into(),
    }
}

/// One run at step `step`: every measure, and the checkpoint file's size. Its files are
/// removed after it.
fn measure(dir: &CheckpointDir, values: &[f32], step: u64) -> anyhow::Result<(Run, u64)> {
    let mut run = Run::default();
    let started = Instant::now();
    let written = write(dir, values, step)?;
    run.write = started.elapsed().as_secs_f64();
    warm(&written.path)?;
    run.warm_restore = read_in_child(&written.path, ReadAs::Checkpoint)?;
    super::page_cache::evict(&written.path)?;
    run.cold_restore = read_in_child(&written.path, ReadAs::Checkpoint)?;

    let raw = vec![7_u8; written.file_bytes as usize];
    let started = Instant::now();
    let raw_path = write_durably(dir.path(), "raw.bin", &raw)?;
    run.raw_write = started.elapsed().as_secs_f64();
    drop(raw);
    warm(&raw_path)?;
    run.warm_raw_read = read_in_child(&raw_path, ReadAs::Raw)?;
    super::page_cache::evict(&raw_path)?;
    run.cold_raw_read = read_in_child(&raw_path, ReadAs::Raw)?;
    for path in [&written.path, &raw_path] {
        std::fs::remove_file(path).with_context(|| format!("remove {}", path.display()))?;
    }
    Ok((run, written.file_bytes))
}

/// Writes a checkpoint of `values` (SGD: values only) as a pserver does, block by block.
fn write(
    dir: &CheckpointDir,
    values: &[f32],
    step: u64,
) -> anyhow::Result<storage::checkpoint::WrittenCheckpoint> {
    let header = CheckpointHeader {
        slot: 0,
        slot_count: 1,
        block_elements: BLOCK_ELEMENTS,
        generation: 1,
        step,
        optimizer: Vec::new(),
        params: vec![ParamShape { name: "weight".into(), shape: vec![values.len() as u64] }],
    };
    let mut writer = dir.writer(&header)?;
    for (index, block) in values.chunks(BLOCK_ELEMENTS as usize).enumerate() {
        writer.write_block("weight", index as u32, 0, block, &[])?;
    }
    Ok(writer.finish()?)
}

/// Reads the file at `path` once, untimed, so that its pages are in the page cache and recently
/// used (pages only written may already be on their way out, and were in runs on this machine).
fn warm(path: &Path) -> anyhow::Result<()> {
    let mut file = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    std::io::copy(&mut file, &mut std::io::sink())
        .with_context(|| format!("read {}", path.display()))?;
    Ok(())
}
