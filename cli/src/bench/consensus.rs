//! `bench consensus`: three `bench consensus-node` processes on loopback with fsync on; small
//! `Put`s from 1, 16, 64 and 256 concurrent clients for a fixed time each; a table of
//! writes/s and commit latency against a same-run baseline of raw sled
//! `insert + flush + sync_data`, one write at a time, on the same disk.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ::consensus::kv_service::{cluster_info, KvClient};
use anyhow::Context as _;
use clap::Args;

use super::table::Table;

/// Nodes in the benchmark's group.
const NODE_COUNT: u64 = 3;
/// Clients share one HTTP/2 connection per this many.
const CLIENTS_PER_CONNECTION: usize = 32;
/// Keys each client cycles through, so the state (and snapshots) stay small.
const KEYS_PER_CLIENT: u64 = 100;
/// The group must elect a leader within this long.
const LEADER_WAIT_MS_MAX: u64 = 30_000;
const CLIENTS_MAX: usize = 4096;
const VALUE_BYTES_MAX: usize = 16 * 1024;

#[derive(Debug, Args)]
pub struct ConsensusBenchArgs {
    /// Seconds of writes per row (and for the baseline).
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Concurrent clients, one row each.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64,256")]
    pub clients: Vec<usize>,
    /// Bytes of each written value.
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// The nodes' data directories go in a new temporary directory here (removed after), so
    /// the disk measured is this one.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
}

struct Row {
    label: String,
    writes: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

pub fn run(args: &ConsensusBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!((1..=3600).contains(&args.seconds), "--seconds must be in 1..=3600");
    anyhow::ensure!(!args.clients.is_empty(), "--clients is empty");
    anyhow::ensure!(
        args.clients.iter().all(|clients| (1..=CLIENTS_MAX).contains(clients)),
        "every --clients count must be in 1..={CLIENTS_MAX}"
    );
    anyhow::ensure!(args.value_bytes <= VALUE_BYTES_MAX, "--value-bytes is over {VALUE_BYTES_MAX}");
    let root = tempfile::tempdir_in(&args.dir)
        .with_context(|| format!("create a temporary directory in {}", args.dir.display()))?;
    let runtime = tokio::runtime::Runtime::new().context("start the tokio runtime")?;
    runtime.block_on(bench(args, root.path()))
}

async fn bench(args: &ConsensusBenchArgs, root: &Path) -> anyhow::Result<()> {
    let duration = Duration::from_secs(args.seconds);
    let baseline_dir = root.join("baseline");
    let value_bytes = args.value_bytes;
    let baseline = tokio::task::spawn_blocking(move || {
        ::consensus::log_store::measure_raw_sync_writes(&baseline_dir, duration, value_bytes)
    })
    .await
    .context("join the baseline")?
    .context("measure raw sled writes")?;
    let baseline = Row {
        label: "raw sled fsync (1 writer)".to_string(),
        writes: baseline.len(),
        elapsed: duration,
        latencies: baseline,
    };
    let mut group = Group::spawn(root)?;
    let leader = group.wait_for_leader().await?;
    let mut rows = Vec::new();
    for &clients in &args.clients {
        rows.push(drive(&leader, clients, duration, args.value_bytes).await?);
        group.check_alive()?;
    }
    let disk_bytes = group.disk_bytes()?;
    drop(group);
    print_table(&baseline, &rows);
    println!(
        "disk used by {NODE_COUNT} nodes after the run: {:.1} MiB",
        disk_bytes as f64 / (1024.0 * 1024.0)
    );
    Ok(())
}

/// `clients` tasks writing as fast as they can through the leader for `duration`.
async fn drive(
    leader: &str,
    clients: usize,
    duration: Duration,
    value_bytes: usize,
) -> anyhow::Result<Row> {
    let connection_count = clients.div_ceil(CLIENTS_PER_CONNECTION);
    let mut connections = Vec::with_capacity(connection_count);
    for _ in 0..connection_count {
        connections.push(KvClient::connect(leader).await?);
    }
    let value = "v".repeat(value_bytes);
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(clients);
    for client in 0..clients {
        let mut connection = connections[client % connection_count].clone();
        let value = value.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut sequence = 0u64;
            while Instant::now() < deadline {
                let key = format!("client-{client}-{}", sequence % KEYS_PER_CLIENT);
                let write_start = Instant::now();
                connection.put(key, value.clone()).await?;
                latencies.push(write_start.elapsed());
                sequence += 1;
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.context("join a client")?.context("a client's write failed")?);
    }
    let elapsed = start.elapsed();
    Ok(Row { label: clients.to_string(), writes: latencies.len(), elapsed, latencies })
}

fn print_table(baseline: &Row, rows: &[Row]) {
    let mut table =
        Table::new(&["clients", "writes", "writes/s", "vs raw sled", "p50 ms", "p99 ms"]);
    let baseline_rate = rate(baseline);
    for row in std::iter::once(baseline).chain(rows) {
        let mut latencies = row.latencies.clone();
        latencies.sort_unstable();
        table.row(vec![
            row.label.clone(),
            row.writes.to_string(),
            format!("{:.0}", rate(row)),
            format!("{:.2}x", rate(row) / baseline_rate.max(f64::MIN_POSITIVE)),
            format!("{:.2}", percentile_ms(&latencies, 0.50)),
            format!("{:.2}", percentile_ms(&latencies, 0.99)),
        ]);
    }
    print!("{}", table.render());
}

fn rate(row: &Row) -> f64 {
    row.writes as f64 / row.elapsed.as_secs_f64()
}

fn percentile_ms(sorted: &[Duration], quantile: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return 0.0;
    };
    let index = ((sorted.len() as f64 * quantile) as usize).min(last);
    sorted[index].as_secs_f64() * 1000.0
}

/// The three node processes; killed when dropped, also on error or panic.
struct Group {
    children: Vec<(u64, Child)>,
    addrs: Vec<String>,
    root: PathBuf,
}

impl Group {
    fn spawn(root: &Path) -> anyhow::Result<Self> {
        let addrs = free_loopback_addrs(NODE_COUNT as usize)?;
        let peers: Vec<String> =
            addrs.iter().enumerate().map(|(index, addr)| format!("{}={addr}", index + 1)).collect();
        let peers = peers.join(",");
        let exe = std::env::current_exe().context("find the raftrain executable")?;
        let mut group =
            Group { children: Vec::new(), addrs: addrs.clone(), root: root.to_path_buf() };
        for (index, addr) in addrs.iter().enumerate() {
            let id = index as u64 + 1;
            let log =
                File::create(root.join(format!("node-{id}.log"))).context("create a node log")?;
            let child = Command::new(&exe)
                .args(["bench", "consensus-node", "--id", &id.to_string(), "--listen", addr])
                .args(["--peers", &peers, "--data-dir"])
                .arg(root.join(format!("node-{id}")))
                .env("RUST_LOG", std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_string()))
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .with_context(|| format!("start node {id}"))?;
            group.children.push((id, child));
        }
        Ok(group)
    }

    /// Fails if a node process has exited, naming its log.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        for (id, child) in &mut self.children {
            if child.try_wait().context("check a node process")?.is_some() {
                let log = self.root.join(format!("node-{id}.log"));
                anyhow::bail!("node {id} exited; see {}", log.display());
            }
        }
        Ok(())
    }

    async fn wait_for_leader(&mut self) -> anyhow::Result<String> {
        let deadline = Instant::now() + Duration::from_millis(LEADER_WAIT_MS_MAX);
        while Instant::now() < deadline {
            self.check_alive()?;
            for addr in &self.addrs {
                if let Ok(info) = cluster_info(addr).await {
                    if let (Some(leader), Some(_)) = (info.leader_addr, info.leader_id) {
                        return Ok(leader);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!(
            "no leader after {LEADER_WAIT_MS_MAX} ms; see the node logs in {}",
            self.root.display()
        )
    }

    fn disk_bytes(&self) -> anyhow::Result<u64> {
        let mut total = 0;
        for (id, _) in &self.children {
            total += directory_bytes(&self.root.join(format!("node-{id}")))?;
        }
        Ok(total)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            // Already gone is fine: there is nothing left to stop.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Distinct loopback addresses that were free a moment ago.
fn free_loopback_addrs(count: usize) -> anyhow::Result<Vec<String>> {
    let listeners: Vec<std::net::TcpListener> = (0..count)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .context("find free loopback ports")?;
    listeners.iter().map(|listener| Ok(listener.local_addr()?.to_string())).collect()
}

fn directory_bytes(path: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for item in std::fs::read_dir(path).with_context(|| format!("list {}", path.display()))? {
        let item = item?;
        let metadata = item.metadata()?;
        total += if metadata.is_dir() { directory_bytes(&item.path())? } else { metadata.len() };
    }
    Ok(total)
}
