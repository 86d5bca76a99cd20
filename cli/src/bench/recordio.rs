//! `bench recordio`: writes a dataset of `--bytes` (default 1 GiB) per compressor, then measures
//! raw sequential `read()` of the file, a full record scan, and building the chunk index.

use super::table::Table;
use anyhow::Context as _;
use clap::Args;
use proto::Message as _;
use rand::{Rng as _, SeedableRng as _};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use storage::recordio::{ChunkScanner, Compressor, FileIndex, Writer, WriterOptions};

/// Distinct records cycled through while writing; more than fits in any compressor's window.
const RECORD_POOL_COUNT: usize = 4096;
/// Dense features per generated example.
const FEATURE_COUNT: usize = 24;
/// Buffer for the raw sequential read baseline.
const READ_BUFFER_BYTES: usize = 1 << 20;

#[derive(Debug, Args)]
pub(crate) struct RecordioBenchArgs {
    /// Uncompressed record bytes written per compressor.
    #[arg(long, default_value_t = 1 << 30)]
    bytes: u64,
    /// Directory for the dataset files (default: a new temporary directory, removed after).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Compressors to measure, in order.
    #[arg(long, value_delimiter = ',', default_value = "none,snappy,gzip")]
    compressors: Vec<Compressor>,
}

struct Measurement {
    compressor: Compressor,
    file_bytes: u64,
    logical_bytes: u64,
    records: u64,
    write: Duration,
    /// Reads of the file while it is in the page cache.
    raw_read: Duration,
    scan: Duration,
    /// The same reads after the file's pages were dropped from the cache: from the disk.
    raw_read_cold: Duration,
    scan_cold: Duration,
    index: Duration,
}

pub(crate) fn run(args: &RecordioBenchArgs) -> anyhow::Result<()> {
    let temporary = tempfile::tempdir().context("create a temporary directory")?;
    let directory = args.dir.clone().unwrap_or_else(|| temporary.path().to_path_buf());
    let pool = record_pool();
    let mut table = Table::new(&[
        "compressor",
        "file MiB",
        "write MB/s",
        "raw read MB/s",
        "scan MB/s",
        "scan records/s",
        "scan/raw",
        "cold raw MB/s",
        "cold scan MB/s",
        "cold scan/raw",
        "index ms",
        "index/scan",
    ]);
    for &compressor in &args.compressors {
        let path = directory.join(format!("bench-{compressor}.recordio"));
        let measurement = measure(&path, compressor, args.bytes, &pool)?;
        std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
        table.row(cells(&measurement));
    }
    println!(
        "RecordIO, {} MiB of records per compressor (MB = 10^6 bytes; write and scan MB/s count \
         uncompressed record bytes, raw read counts file bytes; scan/raw compares file bytes per \
         second; cold = after dropping the file from the page cache)",
        args.bytes >> 20
    );
    print!("{}", table.render());
    Ok(())
}

fn measure(
    path: &Path,
    compressor: Compressor,
    bytes: u64,
    pool: &[Vec<u8>],
) -> anyhow::Result<Measurement> {
    let started = Instant::now();
    let (records, logical_bytes) = write_dataset(path, compressor, bytes, pool)?;
    let write = started.elapsed();
    let file_bytes = std::fs::metadata(path)?.len();
    let raw_read = time(|| read_raw(path))?;
    let started = Instant::now();
    let scanned = scan_records(path)?;
    let scan = started.elapsed();
    anyhow::ensure!(scanned == records, "scan found {scanned} records, wrote {records}");
    super::page_cache::evict(path)?;
    let raw_read_cold = time(|| read_raw(path))?;
    super::page_cache::evict(path)?;
    let scan_cold = time(|| scan_records(path).map(|_| ()))?;
    let started = Instant::now();
    let index = FileIndex::build(path)?;
    let index_time = started.elapsed();
    anyhow::ensure!(
        index.record_count() == records,
        "index counts {} records",
        index.record_count()
    );
    Ok(Measurement {
        compressor,
        file_bytes,
        logical_bytes,
        records,
        write,
        raw_read,
        scan,
        raw_read_cold,
        scan_cold,
        index: index_time,
    })
}

/// The chunks the benchmark writes: large ones (PaddlePaddle's 32 MiB), which the scan rows
/// of BENCHMARKS.md were measured with; files written for training default to 1 MiB.
const BENCH_CHUNK_BYTES: usize = 32 << 20;

fn write_dataset(
    path: &Path,
    compressor: Compressor,
    bytes: u64,
    pool: &[Vec<u8>],
) -> anyhow::Result<(u64, u64)> {
    let file = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let buffered = std::io::BufWriter::with_capacity(READ_BUFFER_BYTES, file);
    let options = WriterOptions { compressor, max_chunk_bytes: BENCH_CHUNK_BYTES };
    let mut writer = Writer::new(buffered, options);
    let (mut records, mut logical_bytes) = (0u64, 0u64);
    while logical_bytes < bytes {
        let record = &pool[records as usize % pool.len()];
        writer.write_record(record)?;
        records += 1;
        logical_bytes += record.len() as u64;
    }
    let buffered = writer.finish()?;
    let file = buffered.into_inner().map_err(|error| error.into_error())?;
    file.sync_all()?;
    Ok((records, logical_bytes))
}

fn read_raw(path: &Path) -> anyhow::Result<()> {
    let mut file = std::fs::File::open(path)?;
    let mut buffer = vec![0u8; READ_BUFFER_BYTES];
    while file.read(&mut buffer)? > 0 {}
    Ok(())
}

/// Visits every record as a borrowed slice, the way a trainer's reader does.
fn scan_records(path: &Path) -> anyhow::Result<u64> {
    let mut chunks = ChunkScanner::open(&[path.display().to_string()])?;
    let mut records = 0;
    while let Some(chunk) = chunks.next_chunk() {
        for record in chunk?.records() {
            std::hint::black_box(record);
            records += 1;
        }
    }
    Ok(records)
}

fn time(work: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<Duration> {
    let started = Instant::now();
    work()?;
    Ok(started.elapsed())
}

/// Serialized examples with seeded random features: realistic sizes and compressibility.
fn record_pool() -> Vec<Vec<u8>> {
    let mut random = rand::rngs::StdRng::seed_from_u64(7);
    (0..RECORD_POOL_COUNT)
        .map(|_| {
            let dense =
                (0..FEATURE_COUNT).map(|_| (random.gen_range(0..1000) as f32) / 100.0).collect();
            let label = random.gen_range(0..10) as f32;
            proto::example::Example { dense, label, ..Default::default() }.encode_to_vec()
        })
        .collect()
}

fn cells(measurement: &Measurement) -> Vec<String> {
    let rate = |bytes: u64, duration: Duration| bytes as f64 / duration.as_secs_f64() / 1e6;
    let scan_rate = rate(measurement.file_bytes, measurement.scan);
    let raw_rate = rate(measurement.file_bytes, measurement.raw_read);
    let cold_scan_rate = rate(measurement.file_bytes, measurement.scan_cold);
    let cold_raw_rate = rate(measurement.file_bytes, measurement.raw_read_cold);
    vec![
        measurement.compressor.to_string(),
        format!("{}", measurement.file_bytes >> 20),
        format!("{:.0}", rate(measurement.logical_bytes, measurement.write)),
        format!("{raw_rate:.0}"),
        format!("{:.0}", rate(measurement.logical_bytes, measurement.scan)),
        format!("{:.0}", measurement.records as f64 / measurement.scan.as_secs_f64()),
        format!("{:.0}%", 100.0 * scan_rate / raw_rate),
        format!("{cold_raw_rate:.0}"),
        format!("{:.0}", rate(measurement.logical_bytes, measurement.scan_cold)),
        format!("{:.0}%", 100.0 * cold_scan_rate / cold_raw_rate),
        format!("{:.2}", measurement.index.as_secs_f64() * 1e3),
        format!("{:.3}%", 100.0 * measurement.index.as_secs_f64() / measurement.scan.as_secs_f64()),
    ]
}
