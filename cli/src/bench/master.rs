//! `bench master`: a real three-process master group under trainer load. Measures task
//! transitions per second (a GetTask plus its TaskFinished count as two) by dataset size and
//! client count, against the smallest dataset as the same-run baseline; leader memory per task;
//! snapshot size and time of the largest state; and failover time after kill -9 of the leader,
//! beside a planned restart (SIGTERM, which hands leadership off).

use super::etcd::{EtcdAnchorArgs, EtcdGroup};
use super::master_load::{catch_up, drive, run_trainer, time_to_first_task, Trainer};
use super::table::Table;
use crate::process_group::{free_loopback_addrs, percentile_ms, resident_bytes, ProcessGroup};
use anyhow::Context as _;
use clap::Args;
use client::{ClientOptions, MasterClient};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Args)]
pub(crate) struct MasterBenchArgs {
    /// Dataset sizes in tasks (one chunk each); the first is the baseline.
    #[arg(long, value_delimiter = ',', default_value = "1000,100000,1000000")]
    tasks: Vec<u64>,
    /// Concurrent trainer clients per row.
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    clients: Vec<usize>,
    /// Seconds of load per row.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Leader take-downs of each kind (kill -9, SIGTERM) in the failover measurement (0 skips
    /// it).
    #[arg(long, default_value_t = 20)]
    failovers: usize,
    /// Trainer clients running while the leader is killed.
    #[arg(long, default_value_t = 16)]
    failover_clients: usize,
    /// Keep the masters' data directories and logs (`process-N.log`) after the run and print
    /// where they are; with RAFTRAIN_BENCH_LOG=<filter> the masters log more than warnings.
    #[arg(long)]
    keep: bool,
    /// Tokio worker threads of each master process (its `--worker-threads`). Three masters
    /// and the trainer clients share the machine, so the default is 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    replica_threads: u16,
    /// The failovers are also taken of a three-member etcd group's leader (the time to its
    /// next `Put`), printed beside raftrain's as "etcd p50 ms" and "etcd p99 ms".
    #[command(flatten)]
    anchor: EtcdAnchorArgs,
}

/// Flags of every master in the benchmark: nothing times out or is declared lost by accident.
const MASTER_FLAGS: [&str; 4] = ["--task-timeout-min-ms", "600000", "--trainer-lease-ms", "60000"];

struct Masters {
    group: ProcessGroup,
    addrs: Vec<String>,
}

pub(crate) fn run(args: &MasterBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.tasks.is_empty() && !args.clients.is_empty(),
        "--tasks and --clients need values"
    );
    let root = tempfile::tempdir().context("create a temporary directory")?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = runtime.block_on(bench(args, root.path()));
    if args.keep {
        // Standard error: standard output holds the tables alone.
        eprintln!("data directories and logs kept in {}", root.keep().display());
    }
    result
}

async fn bench(args: &MasterBenchArgs, root: &Path) -> anyhow::Result<()> {
    let mut throughput = Table::new(&[
        "tasks",
        "clients",
        "transitions/s",
        "vs baseline",
        "p50 ms",
        "p99 ms",
        "leader RSS/task",
    ]);
    let mut baseline: Vec<f64> = Vec::new();
    for (row, &tasks) in args.tasks.iter().enumerate() {
        let dir = root.join(format!("tasks-{tasks}"));
        std::fs::create_dir_all(&dir)?;
        let dataset = super::master_dataset::write(&dir, tasks)?;
        let mut masters = start_masters(&dir, args.replica_threads)?;
        let leader = wait_for_leader(&mut masters).await?;
        let before = resident_bytes(masters.group.pid(leader).context("the leader runs")?)?;
        report(&masters.addrs, &dataset).await?;
        let after = resident_bytes(masters.group.pid(leader).context("the leader runs")?)?;
        for (column, &clients) in args.clients.iter().enumerate() {
            let load = drive(&masters.addrs, clients, Duration::from_secs(args.seconds)).await?;
            masters.group.check_alive()?;
            let rate = load.transitions as f64 / args.seconds as f64;
            if row == 0 {
                baseline.push(rate);
            }
            let mut latencies = load.latencies;
            latencies.sort();
            throughput.row(vec![
                tasks.to_string(),
                clients.to_string(),
                format!("{rate:.0}"),
                format!("{:.0}%", 100.0 * rate / baseline[column]),
                format!("{:.2}", percentile_ms(&latencies, 0.50)),
                format!("{:.2}", percentile_ms(&latencies, 0.99)),
                format!("{} B", after.saturating_sub(before) / tasks.max(1)),
            ]);
        }
    }
    println!(
        "master group of 3 processes, {} s per row; baseline = {} tasks",
        args.seconds, args.tasks[0]
    );
    print!("{}", throughput.render());
    let largest = args.tasks.iter().copied().max().unwrap_or(0);
    print!("{}", super::master_snapshot::measure(largest)?.render());
    if args.failovers > 0 {
        print!("{}", failover(args, root).await?.render());
        println!(
            "failover: from the signal to the leader until the next successful GetTask (etcd: \
             until the next Put any member answers, no other load)"
        );
    }
    Ok(())
}

fn start_masters(dir: &Path, threads: u16) -> anyhow::Result<Masters> {
    let addrs = free_loopback_addrs(3)?;
    let peers: Vec<String> =
        addrs.iter().enumerate().map(|(index, addr)| format!("{}={addr}", index + 1)).collect();
    let commands = (0..3)
        .map(|index| {
            let data_dir: PathBuf = dir.join(format!("master-{}", index + 1));
            let mut command: Vec<String> =
                ["master", "--id", &(index + 1).to_string(), "--listen", &addrs[index]]
                    .iter()
                    .map(|arg| arg.to_string())
                    .collect();
            command.extend([
                "--peers".to_string(),
                peers.join(","),
                "--data-dir".to_string(),
                data_dir.display().to_string(),
                "--worker-threads".to_string(),
                threads.to_string(),
            ]);
            command.extend(MASTER_FLAGS.iter().map(|flag| flag.to_string()));
            command
        })
        .collect();
    Ok(Masters { group: ProcessGroup::start(commands, dir)?, addrs })
}

/// Waits for a leader, failing at once (with its log) if a master process died.
async fn wait_for_leader(masters: &mut Masters) -> anyhow::Result<usize> {
    for _ in 0..60 {
        masters.group.check_alive()?;
        if let Ok(leader) = leader_index(&masters.addrs, Duration::from_millis(500)).await {
            return Ok(leader);
        }
    }
    anyhow::bail!("no leader was elected within a minute")
}

async fn leader_index(addrs: &[String], call_deadline: Duration) -> anyhow::Result<usize> {
    let options = ClientOptions { call_deadline: Some(call_deadline), ..ClientOptions::default() };
    let client = MasterClient::new(addrs, options)?;
    let status = client.status().await?;
    let leader = status.group.leader_id.context("status came from no leader")?;
    anyhow::ensure!(leader >= 1, "status names leader 0");
    Ok(leader as usize - 1)
}

async fn report(addrs: &[String], dataset: &str) -> anyhow::Result<()> {
    let options = ClientOptions {
        call_deadline: Some(Duration::from_secs(600)),
        rpc_timeout: Duration::from_secs(120),
        ..ClientOptions::default()
    };
    let client = MasterClient::new(addrs, options)?;
    // Many passes: the queue cycles for as long as the benchmark runs.
    client.report_dataset("bench", &[dataset.to_string()], 1_000_000).await?;
    Ok(())
}

/// Waits until replica `index` has applied what the leader had applied when the wait began.
async fn wait_until_caught_up(addrs: &[String], index: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let leader = leader_index(addrs, Duration::from_secs(10)).await?;
    let target = applied_index(&addrs[leader]).await?;
    while Instant::now() < deadline {
        if applied_index(&addrs[index]).await.is_ok_and(|applied| applied >= target) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("master {} did not catch up within a minute", index + 1)
}

async fn applied_index(addr: &str) -> anyhow::Result<u64> {
    let client = MasterClient::new(&[addr.to_string()], ClientOptions::default())?;
    Ok(client.member_info(addr).await?.last_applied_index)
}

/// How a leader is taken down in the failover measurement.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TakeDown {
    /// kill -9: a crash.
    Kill,
    /// SIGTERM: a planned restart (the leader hands off, then exits).
    Terminate,
}

impl TakeDown {
    fn name(self) -> &'static str {
        match self {
            TakeDown::Kill => "kill -9",
            TakeDown::Terminate => "SIGTERM",
        }
    }
}

/// How long a SIGTERM'd master may take to exit before the benchmark calls it a failure.
const TERMINATE_EXIT_TIMEOUT: Duration = Duration::from_secs(20);

/// After a failover, the next leader is taken down only once it has led this long, as in a
/// running group, where a planned restart meets a leader that has led for minutes: openraft
/// grants no vote within a lease (`--election-timeout-max-ms`) of a leader's own election, so
/// a leader taken down sooner cannot hand off before that lease ends, and the row measured
/// the benchmark's pace (a leader 150-300 ms old) instead of the handoff. etcd's rows wait the
/// same.
pub(crate) const LEADER_SETTLE: Duration = Duration::from_secs(1);

/// Takes the leader down `failovers` times each way (kill -9, then SIGTERM) under load; time
/// from each signal to the next GetTask.
async fn failover(args: &MasterBenchArgs, root: &Path) -> anyhow::Result<Table> {
    let dir = root.join("failover");
    std::fs::create_dir_all(&dir)?;
    let dataset = super::master_dataset::write(&dir, 1000)?;
    let mut masters = start_masters(&dir, args.replica_threads)?;
    wait_for_leader(&mut masters).await?;
    report(&masters.addrs, &dataset).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..args.failover_clients)
        .map(|index| tokio::spawn(run_trainer(masters.addrs.clone(), index, stop.clone())))
        .collect();
    let mut probe =
        Trainer::register(&masters.addrs, ClientOptions::default(), "probe".into()).await?;
    let mut measured = Vec::new();
    for take_down in [TakeDown::Kill, TakeDown::Terminate] {
        let mut times = Vec::new();
        for _ in 0..args.failovers {
            times.push(take_leader_down(&mut masters, &mut probe, take_down).await?);
        }
        print_each("", take_down, &mut times);
        measured.push((take_down, times));
    }
    stop.store(true, Ordering::Relaxed);
    for handle in load {
        handle.await.context("a load client panicked")??;
    }
    drop(masters);
    let anchor = etcd_failovers(args, root).await?;
    Ok(failover_table(args, &measured, anchor.as_deref()))
}

/// raftrain's failover times per take-down, with etcd's beside them when the anchor ran.
fn failover_table(
    args: &MasterBenchArgs,
    measured: &[(TakeDown, Vec<Duration>)],
    anchor: Option<&[Vec<Duration>]>,
) -> Table {
    let mut table = Table::new(&[
        "take-down",
        "failovers",
        "clients",
        "p50 ms",
        "p99 ms",
        "max ms",
        "etcd p50 ms",
        "etcd p99 ms",
    ]);
    for (index, (take_down, times)) in measured.iter().enumerate() {
        let etcd = anchor.map(|anchor| &anchor[index]);
        let etcd_ms =
            |quantile| etcd.map_or("-".into(), |times| ms(percentile_ms(times, quantile)));
        table.row(vec![
            take_down.name().to_string(),
            times.len().to_string(),
            args.failover_clients.to_string(),
            ms(percentile_ms(times, 0.50)),
            ms(percentile_ms(times, 0.99)),
            ms(times.last().map_or(0.0, |time| time.as_secs_f64() * 1e3)),
            etcd_ms(0.50),
            etcd_ms(0.99),
        ]);
    }
    table
}

/// The same take-downs of an etcd group's leader, when the anchor runs: per take-down, the
/// sorted times to its next `Put`.
async fn etcd_failovers(
    args: &MasterBenchArgs,
    root: &Path,
) -> anyhow::Result<Option<Vec<Vec<Duration>>>> {
    let Some(etcd) = args.anchor.binary() else { return Ok(None) };
    let etcd_root = root.join("failover-etcd");
    std::fs::create_dir_all(&etcd_root)
        .with_context(|| format!("create {}", etcd_root.display()))?;
    let mut group = EtcdGroup::spawn(&etcd, &etcd_root)?;
    let mut anchor = Vec::new();
    for take_down in [TakeDown::Kill, TakeDown::Terminate] {
        let mut times =
            super::etcd_failover::measure(&mut group, take_down, args.failovers).await?;
        print_each("etcd ", take_down, &mut times);
        anchor.push(times);
    }
    Ok(Some(anchor))
}

/// Sorts `times` and prints each.
fn print_each(system: &str, take_down: TakeDown, times: &mut [Duration]) {
    times.sort();
    let each: Vec<String> = times.iter().map(|time| time.as_millis().to_string()).collect();
    println!("each {system}failover after {}, sorted (ms): {}", take_down.name(), each.join(" "));
}

fn ms(value: f64) -> String {
    format!("{value:.0}")
}

/// One failover: the leader taken down, the time to the next GetTask, the leader restarted.
async fn take_leader_down(
    masters: &mut Masters,
    probe: &mut Trainer,
    take_down: TakeDown,
) -> anyhow::Result<Duration> {
    let leader = wait_for_leader(masters).await?;
    catch_up(probe).await?;
    let signalled_at = Instant::now();
    match take_down {
        TakeDown::Kill => masters.group.kill(leader),
        TakeDown::Terminate => {
            masters.group.signal(leader, nix::sys::signal::Signal::SIGTERM)?;
        }
    }
    tracing::debug!(master = leader + 1, ?take_down, "took the leader down");
    let time = time_to_first_task(probe, signalled_at).await?;
    if let TakeDown::Terminate = take_down {
        let group = &mut masters.group;
        let exited =
            tokio::task::block_in_place(|| group.wait_exit(leader, TERMINATE_EXIT_TIMEOUT));
        let status = exited.with_context(|| {
            format!(
                "master {} did not exit within {TERMINATE_EXIT_TIMEOUT:?} of SIGTERM",
                leader + 1
            )
        })?;
        anyhow::ensure!(status.success(), "master {} exited with {status} on SIGTERM", leader + 1);
    }
    masters.group.spawn(leader)?;
    // Each take-down is one fault: the next comes only once the restarted replica has caught
    // up (taking the leader down while a replica still lags is a double fault, and openraft
    // then adds a `smaller_log_timeout` to the lagging replica's election).
    wait_until_caught_up(&masters.addrs, leader).await?;
    tokio::time::sleep(LEADER_SETTLE).await;
    Ok(time)
}
