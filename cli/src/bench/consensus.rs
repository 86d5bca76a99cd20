//! `bench consensus`: three `bench consensus-node` processes on loopback with fsync on; small
//! writes from 1, 16, 64 and 256 concurrent clients (unary `Put` calls, then one `PutStream`
//! per client) for a fixed time each; a table of
//! writes/s and commit latency against a same-run baseline of raw sled
//! `insert + flush + sync_data`, one write at a time, on the same disk, and, when an `etcd`
//! binary is found, against a three-member etcd group driven the same way in the same run.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::kv::service::{cluster_info, KvClient, KEYS_PER_WRITER, VALUE_BYTES_MAX, WRITERS_MAX};
use anyhow::Context as _;
use clap::Args;

use super::etcd::{EtcdAnchorArgs, EtcdClient, EtcdGroup};
use super::table::Table;
use crate::process_group::{directory_bytes, free_loopback_addrs, percentile_ms, ProcessGroup};

/// Nodes in the benchmark's group.
const NODE_COUNT: u64 = 3;
/// Clients share one HTTP/2 connection per this many.
const CLIENTS_PER_CONNECTION: usize = 32;
/// The group must elect a leader within this long.
const LEADER_WAIT_MS_MAX: u64 = 30_000;

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
    /// Tokio worker threads of each node process (its `--worker-threads`). With two entries
    /// in flight, 2 measured faster than 1 on 2 cores (BENCHMARKS.md).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..))]
    pub replica_threads: u16,
    /// Writers run inside the leader process (no client RPC per write), one row each, to
    /// separate the cost of consensus from that of a gRPC call per write. Without a value:
    /// none.
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "64,256")]
    pub in_process: Vec<u32>,
    /// How clients send their writes, one row per client count for each: `unary` is one `Put`
    /// call per write; `stream` is one `PutStream` per client, still one write outstanding.
    #[arg(long, value_delimiter = ',', default_value = "unary,stream")]
    pub rpc: Vec<ClientRpc>,
    /// Each client count is also written to a three-member etcd group with unary `Put` calls,
    /// and raftrain's client rows say how they compare ("vs etcd").
    #[command(flatten)]
    pub anchor: EtcdAnchorArgs,
}

/// How a benchmark client sends its writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientRpc {
    /// A unary `Put` call per write.
    Unary,
    /// One `PutStream` per client, a message each way per write.
    Stream,
}

/// The group a benchmark client writes to, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Raftrain(ClientRpc),
    /// The etcd anchor, one unary `KV/Put` per write.
    Etcd,
}

/// One client's connection to the group under test.
#[derive(Clone)]
enum Connection {
    Raftrain(KvClient),
    Etcd(EtcdClient),
}

impl Connection {
    async fn open(target: Target, addr: &str) -> anyhow::Result<Self> {
        Ok(match target {
            Target::Raftrain(_) => Self::Raftrain(KvClient::connect(addr).await?),
            Target::Etcd => Self::Etcd(EtcdClient::connect(addr).await?),
        })
    }
}

struct Row {
    label: String,
    /// The clients of a client row and whom they wrote to; `None` for other rows.
    clients: Option<(usize, Target)>,
    writes: usize,
    elapsed: Duration,
    latencies: Vec<Duration>,
}

pub fn run(args: &ConsensusBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!((1..=3600).contains(&args.seconds), "--seconds must be in 1..=3600");
    anyhow::ensure!(!args.clients.is_empty(), "--clients is empty");
    anyhow::ensure!(!args.rpc.is_empty(), "--rpc is empty");
    anyhow::ensure!(
        args.clients.iter().all(|clients| (1..=WRITERS_MAX as usize).contains(clients)),
        "every --clients count must be in 1..={WRITERS_MAX}"
    );
    anyhow::ensure!(
        args.value_bytes <= VALUE_BYTES_MAX as usize,
        "--value-bytes is over {VALUE_BYTES_MAX}"
    );
    anyhow::ensure!(
        args.in_process.iter().all(|writers| (1..=WRITERS_MAX).contains(writers)),
        "every --in-process count must be in 1..={WRITERS_MAX}"
    );
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
        super::raw_sync::measure_raw_sync_writes(&baseline_dir, duration, value_bytes)
    })
    .await
    .context("join the baseline")?
    .context("measure raw sled writes")?;
    let baseline = Row {
        label: "raw sled fsync (1 writer)".to_string(),
        clients: None,
        writes: baseline.len(),
        elapsed: duration,
        latencies: baseline,
    };
    let mut group = Group::spawn(root, args.replica_threads)?;
    let leader = group.wait_for_leader().await?;
    let mut etcd = start_etcd(args, root).await?;
    let mut rows = Vec::new();
    for &clients in &args.clients {
        for &rpc in &args.rpc {
            let target = Target::Raftrain(rpc);
            rows.push(drive(&leader, clients, target, duration, args.value_bytes).await?);
            group.check_alive()?;
        }
        if let Some((etcd, etcd_leader)) = &mut etcd {
            rows.push(drive(etcd_leader, clients, Target::Etcd, duration, args.value_bytes).await?);
            etcd.check_alive()?;
        }
    }
    drop(etcd);
    for &writers in &args.in_process {
        rows.push(drive_in_process(&leader, writers, duration, args.value_bytes).await?);
        group.check_alive()?;
    }
    let disk_bytes = group.disk_bytes()?;
    drop(group);
    print_table(&baseline, &rows);
    let mib = |bytes: u64| bytes as f64 / (1024.0 * 1024.0);
    let writes: usize = rows.iter().map(|row| row.writes).sum();
    println!(
        "after {writes} writes: disk used by {NODE_COUNT} nodes {:.1} MiB, largest data directory {:.1} MiB",
        mib(disk_bytes.iter().sum()),
        mib(disk_bytes.iter().copied().max().unwrap_or(0))
    );
    Ok(())
}

/// The etcd anchor group and its leader's client address, when etcd is found and wanted;
/// otherwise says in one line why there are no etcd rows.
async fn start_etcd(
    args: &ConsensusBenchArgs,
    root: &Path,
) -> anyhow::Result<Option<(EtcdGroup, String)>> {
    let Some(etcd) = args.anchor.binary() else { return Ok(None) };
    let etcd_root = root.join("etcd");
    std::fs::create_dir_all(&etcd_root)
        .with_context(|| format!("create {}", etcd_root.display()))?;
    let mut group = EtcdGroup::spawn(&etcd, &etcd_root)?;
    let leader = group.wait_for_leader().await?;
    Ok(Some((group, leader)))
}

/// `clients` tasks writing as fast as they can through the leader for `duration`.
async fn drive(
    leader: &str,
    clients: usize,
    target: Target,
    duration: Duration,
    value_bytes: usize,
) -> anyhow::Result<Row> {
    let connection_count = clients.div_ceil(CLIENTS_PER_CONNECTION);
    let mut connections = Vec::with_capacity(connection_count);
    for _ in 0..connection_count {
        connections.push(Connection::open(target, leader).await?);
    }
    let value = "v".repeat(value_bytes);
    let start = Instant::now();
    let deadline = start + duration;
    let mut tasks = Vec::with_capacity(clients);
    for client in 0..clients {
        let connection = connections[client % connection_count].clone();
        let value = value.clone();
        tasks.push(tokio::spawn(client_writes(connection, target, client, deadline, value)));
    }
    let mut latencies = Vec::new();
    for task in tasks {
        latencies.extend(task.await.context("join a client")?.context("a client's write failed")?);
    }
    let elapsed = start.elapsed();
    let label = match target {
        Target::Raftrain(rpc) => format!("{clients} {}", rpc_name(rpc)),
        Target::Etcd => format!("etcd, {clients} unary"),
    };
    let clients = Some((clients, target));
    Ok(Row { label, clients, writes: latencies.len(), elapsed, latencies })
}

/// One client: writes one at a time until `deadline`; returns each write's latency.
async fn client_writes(
    mut connection: Connection,
    target: Target,
    client: usize,
    deadline: Instant,
    value: String,
) -> anyhow::Result<Vec<Duration>> {
    let mut stream = match (&mut connection, target) {
        (Connection::Raftrain(kv), Target::Raftrain(ClientRpc::Stream)) => {
            Some(kv.open_stream().await?)
        }
        _ => None,
    };
    let mut latencies = Vec::new();
    let mut sequence = 0u64;
    while Instant::now() < deadline {
        let key = format!("client-{client}-{}", sequence % KEYS_PER_WRITER);
        let write_start = Instant::now();
        match (&mut stream, &mut connection) {
            (Some(stream), _) => stream.put(key, value.clone()).await?,
            (None, Connection::Raftrain(kv)) => kv.put(key, value.clone()).await?,
            (None, Connection::Etcd(etcd)) => etcd.put(key, value.clone()).await?,
        }
        latencies.push(write_start.elapsed());
        sequence += 1;
    }
    Ok(latencies)
}

fn rpc_name(rpc: ClientRpc) -> &'static str {
    match rpc {
        ClientRpc::Unary => "unary",
        ClientRpc::Stream => "stream",
    }
}

/// `writers` writers inside the leader process for `duration`, through the `Load` RPC.
async fn drive_in_process(
    leader: &str,
    writers: u32,
    duration: Duration,
    value_bytes: usize,
) -> anyhow::Result<Row> {
    let value_bytes = u32::try_from(value_bytes).context("--value-bytes")?;
    let mut client = KvClient::connect(leader).await?;
    let (latencies, elapsed) = client.load(writers, duration, value_bytes).await?;
    let label = format!("{writers} in the leader");
    Ok(Row { label, clients: None, writes: latencies.len(), elapsed, latencies })
}

fn print_table(baseline: &Row, rows: &[Row]) {
    let mut table = Table::new(&[
        "clients",
        "writes",
        "writes/s",
        "vs raw sled",
        "vs etcd",
        "p50 ms",
        "p99 ms",
        "etcd p50/p99 ms",
    ]);
    let baseline_rate = rate(baseline);
    for row in std::iter::once(baseline).chain(rows) {
        let etcd = etcd_row(row, rows);
        let (vs_etcd, etcd_latency) = match etcd {
            Some(etcd) => {
                let ratio = format!("{:.2}x", rate(row) / rate(etcd).max(f64::MIN_POSITIVE));
                let (p50, p99) = p50_p99(etcd);
                (ratio, format!("{p50:.2} / {p99:.2}"))
            }
            None => ("-".to_string(), "-".to_string()),
        };
        let (p50, p99) = p50_p99(row);
        table.row(vec![
            row.label.clone(),
            row.writes.to_string(),
            format!("{:.0}", rate(row)),
            format!("{:.2}x", rate(row) / baseline_rate.max(f64::MIN_POSITIVE)),
            vs_etcd,
            format!("{p50:.2}"),
            format!("{p99:.2}"),
            etcd_latency,
        ]);
    }
    print!("{}", table.render());
}

/// The etcd row with as many clients as raftrain client row `row`, if both exist.
fn etcd_row<'a>(row: &Row, rows: &'a [Row]) -> Option<&'a Row> {
    let (clients, Target::Raftrain(_)) = row.clients? else {
        return None;
    };
    rows.iter().find(|etcd| etcd.clients == Some((clients, Target::Etcd)))
}

fn p50_p99(row: &Row) -> (f64, f64) {
    let mut latencies = row.latencies.clone();
    latencies.sort_unstable();
    (percentile_ms(&latencies, 0.50), percentile_ms(&latencies, 0.99))
}

fn rate(row: &Row) -> f64 {
    row.writes as f64 / row.elapsed.as_secs_f64()
}

/// The three node processes; killed when dropped, also on error or panic.
struct Group {
    processes: ProcessGroup,
    addrs: Vec<String>,
    root: PathBuf,
}

impl Group {
    fn spawn(root: &Path, threads: u16) -> anyhow::Result<Self> {
        let addrs = free_loopback_addrs(NODE_COUNT as usize)?;
        let peers: Vec<String> =
            addrs.iter().enumerate().map(|(index, addr)| format!("{}={addr}", index + 1)).collect();
        let peers = peers.join(",");
        let commands = addrs
            .iter()
            .enumerate()
            .map(|(index, addr)| {
                let id = (index + 1).to_string();
                let data_dir = root.join(format!("node-{id}")).display().to_string();
                [
                    "bench",
                    "consensus-node",
                    "--id",
                    &id,
                    "--listen",
                    addr,
                    "--peers",
                    &peers,
                    "--data-dir",
                    &data_dir,
                    "--worker-threads",
                    &threads.to_string(),
                ]
                .iter()
                .map(|arg| arg.to_string())
                .collect()
            })
            .collect();
        let processes = ProcessGroup::start(commands, root)?;
        Ok(Group { processes, addrs, root: root.to_path_buf() })
    }

    /// Fails, with the end of its log, if a node process has exited.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        self.processes.check_alive()
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

    /// Bytes of each node's data directory.
    fn disk_bytes(&self) -> anyhow::Result<Vec<u64>> {
        (0..self.processes.len())
            .map(|index| directory_bytes(&self.root.join(format!("node-{}", index + 1))))
            .collect()
    }
}
