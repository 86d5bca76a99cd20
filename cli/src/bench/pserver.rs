//! `bench pserver`: push+pull throughput of real pserver processes (GB/s of f32 payload) by
//! model size and pserver count, next to raw loopback TCP moving the same bytes in the same run;
//! checkpoint write and restore of the largest model next to a raw write+fsync and read; and
//! the time from kill -9 of a pserver to its replacement serving the restored shard.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use client::pserver::layout::{JobLayout, ParamSpec, BLOCK_ELEMENTS_DEFAULT};
use client::pserver::{PServerClient, PServerClientOptions, Tensors};
use client::{ClientOptions, MasterClient};
use optimizer::{OptimizerConfig, OptimizerKind};

use super::process_logs::ProcessLogs;
use super::pserver_baseline::{checkpoint_rows, raw_tcp_gbps};
use super::table::Table;
use crate::process_group::{free_loopback_addrs, ProcessGroup};

#[derive(Debug, Args)]
pub(crate) struct PServerBenchArgs {
    /// Model sizes in parameters (one tensor each).
    #[arg(long, value_delimiter = ',', default_value = "1000000,10000000,100000000")]
    params: Vec<u64>,
    /// Pserver counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    pservers: Vec<u32>,
    /// Push+pull rounds per row (at least 1 s of work is done in any case).
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// Kill -9 / replacement measurements (0 skips them).
    #[arg(long, default_value_t = 3)]
    replacements: u32,
    /// Where the master and pserver processes log, one subdirectory per cluster, kept after
    /// the run (default: a new directory under the system's temporary directory; either is
    /// named on standard error, which standard output's tables never mix with).
    #[arg(long)]
    log_dir: Option<std::path::PathBuf>,
}

/// The masters' pserver lease in the benchmark: a killed pserver's slot frees after this.
const LEASE_MS: &str = "1000";

pub(crate) fn run(args: &PServerBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.params.is_empty() && !args.pservers.is_empty(),
        "--params and --pservers need values"
    );
    let root = tempfile::tempdir().context("create a temporary directory")?;
    let mut logs = ProcessLogs::create("pserver", args.log_dir.as_deref())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(bench(args, root.path(), &mut logs))
}

async fn bench(args: &PServerBenchArgs, root: &Path, logs: &mut ProcessLogs) -> anyhow::Result<()> {
    let mut table =
        Table::new(&["params", "pservers", "push+pull GB/s", "raw TCP GB/s", "vs raw TCP"]);
    for &params in &args.params {
        let raw = raw_tcp_gbps(params as usize * 4)?;
        for &count in &args.pservers {
            let label = format!("params-{params}-pservers-{count}");
            let cluster = Cluster::start(root, count, &logs.cluster(&label)?).await?;
            let gbps = cluster.throughput(params, args.rounds).await?;
            table.row(vec![
                params.to_string(),
                count.to_string(),
                format!("{gbps:.2}"),
                format!("{raw:.2}"),
                format!("{:.0}%", 100.0 * gbps / raw),
            ]);
        }
    }
    println!("{}", table.render());
    println!(
        "{}",
        checkpoint_rows(root, *args.params.iter().max().expect("checked non-empty"))?.render()
    );
    if args.replacements > 0 {
        let cluster = Cluster::start(root, 2, &logs.cluster("replacements")?).await?;
        let dir = cluster.dir.clone();
        println!("{}", cluster.replacements(args.replacements, &dir).await?.render());
    }
    Ok(())
}

/// One master and `count` pservers, with a client.
struct Cluster {
    processes: ProcessGroup,
    master: Arc<MasterClient>,
    master_addr: String,
    /// Each pserver process's address (process `i + 1`).
    pserver_addrs: Vec<String>,
    dir: std::path::PathBuf,
    count: u32,
}

impl Cluster {
    /// Data under `root` (deleted with it), logs in `log_dir` (kept).
    async fn start(root: &Path, count: u32, log_dir: &Path) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir_in(root)?.keep();
        let addrs = free_loopback_addrs(1 + count as usize)?;
        let master = vec![
            "master".into(),
            "--id".into(),
            "1".into(),
            "--listen".into(),
            addrs[0].clone(),
            "--peers".into(),
            format!("1={}", addrs[0]),
            "--data-dir".into(),
            dir.join("master").display().to_string(),
            "--pserver-lease-ms".into(),
            LEASE_MS.into(),
        ];
        let mut commands = vec![master];
        for addr in &addrs[1..] {
            commands.push(pserver_command(&addrs[0], addr, &dir, count));
        }
        let processes = ProcessGroup::start(commands, log_dir)?;
        let master = Arc::new(MasterClient::new(&addrs[..1], ClientOptions::default())?);
        let pserver_addrs = addrs[1..].to_vec();
        Ok(Self { processes, master, master_addr: addrs[0].clone(), pserver_addrs, dir, count })
    }

    fn client(&self) -> PServerClient {
        PServerClient::new(self.master.clone(), 1, PServerClientOptions::default())
    }

    /// Push+pull rounds of a `params`-parameter model: GB/s of f32 payload both ways. Two
    /// rounds go first, untimed: they fault in the client's two pull buffers and the
    /// pservers' first, which a trainer does once.
    async fn throughput(&self, params: u64, rounds: u32) -> anyhow::Result<f64> {
        let (client, layout) = (self.client(), layout(params, self.count));
        client.wait_for_slots(Some(Duration::from_secs(30))).await?;
        let values = vec![0.5_f32; params as usize];
        client.init_or_wait(&layout, &[("weight", &values)]).await?;
        let mut round = Round::new(client, layout, params);
        round.once().await?;
        round.once().await?;
        let started = Instant::now();
        let mut done = 0;
        while done < rounds || started.elapsed() < Duration::from_secs(1) {
            round.once().await?;
            done += 1;
        }
        Ok(2.0 * done as f64 * params as f64 * 4.0 / started.elapsed().as_secs_f64() / 1e9)
    }

    /// kill -9 of the pserver holding slot 0, then a replacement: restarted on the same
    /// address (the master hands the slot straight back) or started on a new one (it waits
    /// for the dead one's lease); milliseconds until a pull succeeds again.
    async fn replacements(mut self, count: u32, root: &Path) -> anyhow::Result<Table> {
        let mut table = Table::new(&["replacement", "kill -9 to serving (ms)", "lease (ms)"]);
        let (client, layout) = (self.client(), layout(1_000_000, self.count));
        client.wait_for_slots(Some(Duration::from_secs(30))).await?;
        client.init_or_wait(&layout, &[("weight", &vec![0.5; 1_000_000])]).await?;
        for round in 0..2 * count {
            client.push(&layout, &[("weight", &vec![0.001; 1_000_000])]).await?;
            tokio::time::sleep(Duration::from_millis(1500)).await;
            let (process, before) = self.holder(0).await?;
            let new_address = round % 2 == 1;
            if new_address {
                let addr = free_loopback_addrs(1)?.remove(0);
                self.processes
                    .set_args(process, pserver_command(&self.master_addr, &addr, root, self.count));
                self.pserver_addrs[process - 1] = addr;
            }
            self.processes.kill(process);
            let killed = Instant::now();
            self.processes.spawn(process)?;
            client.pull(&layout).await?;
            let serving = killed.elapsed().as_millis();
            anyhow::ensure!(
                self.holder(0).await?.1 != before,
                "the pull was served by a replacement"
            );
            let kind = if new_address { "new address" } else { "same address" };
            table.row(vec![kind.into(), serving.to_string(), LEASE_MS.into()]);
        }
        Ok(table)
    }
}

impl Cluster {
    /// The process serving `slot` and its generation.
    async fn holder(&self, slot: u32) -> anyhow::Result<(usize, u64)> {
        let table = self.master.list_pservers().await?;
        let entry =
            table.pservers.iter().find(|entry| entry.slot == slot).context("the slot is held")?;
        let process = self
            .pserver_addrs
            .iter()
            .position(|addr| *addr == entry.addr)
            .context("a known pserver holds it")?;
        Ok((process + 1, entry.generation))
    }
}

/// One push and one pull of the whole model, as a trainer makes them.
struct Round {
    client: PServerClient,
    layout: JobLayout,
    /// Shared, as a trainer hands its gradient over: each push sends views of it.
    gradient: Arc<Tensors>,
    /// Pulled as a trainer pulls, into shared tensors: the last pull (which the client keeps
    /// too) and the buffers of the one before, pulled into next.
    pulled: Option<Arc<Tensors>>,
    spare: Tensors,
}

impl Round {
    fn new(client: PServerClient, layout: JobLayout, params: u64) -> Self {
        let gradient = vec![0.001_f32; params as usize];
        let gradient = Arc::new(Tensors::from([("weight".to_string(), gradient)]));
        Self { client, layout, gradient, pulled: None, spare: Tensors::new() }
    }

    async fn once(&mut self) -> anyhow::Result<()> {
        let push_started = Instant::now();
        self.client.push_shared(&self.layout, self.gradient.clone()).await?;
        let pull_started = Instant::now();
        let into = std::mem::take(&mut self.spare);
        let latest = self.client.pull_shared(&self.layout, into).await?;
        if let Some(replaced) = self.pulled.replace(latest) {
            self.spare = Arc::try_unwrap(replaced).unwrap_or_default();
        }
        tracing::debug!(
            push_ms = (pull_started - push_started).as_millis() as u64,
            pull_ms = pull_started.elapsed().as_millis() as u64,
            "round"
        );
        Ok(())
    }
}

fn pserver_command(master: &str, addr: &str, dir: &Path, count: u32) -> Vec<String> {
    let args = [
        "pserver",
        "--masters",
        master,
        "--listen",
        addr,
        "--num-pservers",
        &count.to_string(),
        "--checkpoint-interval-s",
        "1",
        "--checkpoint-dir",
    ];
    let mut command: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    command.push(dir.join("checkpoints").display().to_string());
    command
}

fn layout(params: u64, slot_count: u32) -> JobLayout {
    let optimizer = OptimizerConfig { learning_rate: 0.01, kind: OptimizerKind::Sgd };
    JobLayout {
        params: vec![ParamSpec { name: "weight".into(), shape: vec![params] }],
        block_elements: BLOCK_ELEMENTS_DEFAULT,
        slot_count,
        optimizer,
    }
}
