//! One harness run: start the cluster, load a job, run the workload and the observers while
//! the nemesis follows its schedule, heal, give the cluster a quiet window, take the final
//! reads, stop everything, then check the history and write the report.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::rngs::StdRng;
use rand::SeedableRng as _;
use tokio::sync::watch;

use crate::checker::{self, CheckOptions};
use crate::cluster::{Cluster, ClusterOptions, MASTER_COUNT};
use crate::history::{History, OpKind, Operation, Phase, Value, NEMESIS_PROCESS};
use crate::nemesis::{self, Fault, Schedule};
use crate::report::Report;
use crate::workload::observers;
use crate::workload::rendezvous::{self, Rendezvous};
use crate::workload::task_queue::TaskQueue;
use crate::workload::training::{self, TrainingResult};

/// After the last heal, the cluster runs this long without faults before the final reads:
/// the liveness window.
const QUIET_AFTER_MS: u64 = 5_000;
/// How often the harness looks for processes that exited.
const EXIT_POLL_MS: u64 = 250;
/// Passes in the job, so the queue cycles for the whole run.
const PASSES: u32 = 1_000;

/// What the cluster does while the nemesis works.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Task-queue clients recording every call.
    TaskQueue,
    /// A whole training job (trainer processes), judged by its accuracy.
    Training,
    /// The task-queue clients, and beside them clients racing on a torchrun rendezvous
    /// run's keys (adds to a counter, compare-by-version writes of a state key, reads).
    Rendezvous,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub binary: PathBuf,
    pub dir: PathBuf,
    pub schedule: Schedule,
    pub workload: Workload,
    pub clients: usize,
    pub check: CheckOptions,
    /// Masters in network namespaces, links cut by routes (needs root).
    pub netns: bool,
    /// Masters snapshot after this many entries (their `--snapshot-logs-since-last`), so a
    /// replica left behind by a pause or a partition catches up by snapshot install.
    pub snapshot_every: Option<u64>,
    /// Jobs trained at once by the training workload, each with its own data, pservers and
    /// trainers, on the one master group.
    pub jobs: usize,
}

/// The training job may fall this far below the single-process accuracy.
const TRAINING_ACCURACY_BOUND: f64 = 0.02;
/// The training job must finish within this long once the faults are over.
const TRAINING_FINISH_S: u64 = 300;

/// A task's failures and timeouts before it is failed for good: far above what kills,
/// pauses and partitions cause, so that only a real fault of the data could fail a task.
const TASK_FAILURES_MAX: &str = "1000000";
/// The same with a trainer's view of the data broken (`break-trainer-data`) in the schedule:
/// low enough that one trainer failing the tasks it cannot read spends a task's budget within
/// a run (as it would with the masters' default of 3), yet above the few timeouts the other
/// faults cause; the `failed-tasks` checker then sees the wrongly failed task.
const TASK_FAILURES_MAX_BROKEN_VIEW: &str = "10";

fn training_task_failures_max(schedule: &Schedule) -> &'static str {
    match schedule.steps.iter().any(|step| step.fault == Fault::BreakTrainerData) {
        true => TASK_FAILURES_MAX_BROKEN_VIEW,
        false => TASK_FAILURES_MAX,
    }
}

/// Runs everything and returns the checked report (also written under `dir`).
pub async fn run(options: &RunOptions) -> anyhow::Result<Report> {
    let master_args = |task_timeout_ms: &str, task_failures_max: &str| -> Vec<String> {
        let mut args: Vec<String> = [
            "--task-timeout-min-ms",
            task_timeout_ms,
            "--timeout-factor",
            "1",
            "--trainer-lease-ms",
            "2000",
            "--pserver-lease-ms",
            "2000",
            "--max-task-failures",
            task_failures_max,
        ]
        .iter()
        .map(|arg| arg.to_string())
        .collect();
        if let Some(entries) = options.snapshot_every {
            let every = entries.to_string();
            args.extend(["--snapshot-logs-since-last".to_string(), every.clone()]);
            // Keep no more log than that behind a snapshot, so a replica left behind catches
            // up by snapshot install.
            args.extend(["--snapshot-logs-kept".to_string(), every]);
        }
        args
    };
    let cluster_options = match options.workload {
        Workload::TaskQueue | Workload::Rendezvous => ClusterOptions {
            pserver_slots: 1,
            pservers: 2,
            jobs: Vec::new(),
            master_args: master_args("1500", TASK_FAILURES_MAX),
            netns: options.netns,
        },
        Workload::Training => ClusterOptions {
            pserver_slots: 2,
            pservers: 3,
            jobs: training::job_names(options.jobs).into_iter().flatten().collect(),
            master_args: master_args("5000", training_task_failures_max(&options.schedule)),
            netns: options.netns,
        },
    };
    let mut cluster =
        Cluster::start(options.binary.clone(), &options.dir, &cluster_options).await?;
    let outcome = match options.workload {
        Workload::TaskQueue | Workload::Rendezvous => {
            drive_task_queue(&mut cluster, options).await.map(|history| (history, Vec::new()))
        }
        Workload::Training => drive_training(&mut cluster, options).await,
    };
    cluster.stop(Duration::from_secs(5));
    let (history, training) = outcome?;
    cluster.record_exits(&history);
    let ops = history.ops();
    let mut report = checker::check_all(&ops, &options.schedule, &options.check);
    for result in training {
        report = report.with_training(result);
    }
    report.write(&options.dir, &ops, &cluster.log_paths())?;
    Ok(report)
}

/// `recordio synth` into `<dir>/data`: a few hundred small chunks, one task each.
fn write_dataset(binary: &Path, dir: &Path) -> anyhow::Result<String> {
    let data = dir.join("data");
    let status = Command::new(binary)
        .args(["recordio", "synth", "--kind", "blobs", "--examples", "3000", "--features", "4"])
        .args(["--classes", "2", "--seed", "1", "--max-chunk-bytes", "1024", "--out"])
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .status()
        .context("run raftrain recordio synth")?;
    anyhow::ensure!(status.success(), "raftrain recordio synth failed ({status})");
    Ok(data.join("train.recordio").display().to_string())
}

async fn drive_task_queue(
    cluster: &mut Cluster,
    options: &RunOptions,
) -> anyhow::Result<Arc<History>> {
    let dataset = write_dataset(&options.binary, &options.dir)?;
    wait_for_leader(cluster, Duration::from_secs(60)).await?;
    let client = cluster.client(Duration::from_secs(60))?;
    client.report_dataset("jepsen", &[dataset], PASSES).await.context("report the dataset")?;
    let history = Arc::new(History::new());
    let (stop, stopped) = watch::channel(false);
    let next_process = Arc::new(AtomicU64::new(1));
    let workload = TaskQueue {
        masters: cluster.master_addrs.clone(),
        history: history.clone(),
        next_process: next_process.clone(),
        stop: stopped.clone(),
    };
    let clients = tokio::spawn(workload.run(options.clients, options.schedule.seed));
    let rendezvous = (options.workload == Workload::Rendezvous).then(|| {
        let workload = Rendezvous {
            masters: cluster.master_addrs.clone(),
            history: history.clone(),
            next_process,
            stop: stopped.clone(),
        };
        tokio::spawn(workload.run(rendezvous::CLIENTS, options.schedule.seed))
    });
    let observers = spawn_observers(cluster, &history, stopped);
    let faults = run_schedule(cluster, &options.schedule, &history).await;
    watch_exits(cluster, &history, Duration::from_millis(QUIET_AFTER_MS)).await;
    let _ = stop.send(true);
    let _ = clients.await;
    if let Some(rendezvous) = rendezvous {
        let _ = rendezvous.await;
    }
    let _ = observers.await;
    faults?;
    final_reads(cluster, &history).await;
    if options.workload == Workload::Rendezvous {
        // A missing final read is the checker's finding, not a harness error.
        let _ = rendezvous::final_read(&history, &cluster.master_addrs).await;
    }
    Ok(history)
}

fn spawn_observers(
    cluster: &Cluster,
    history: &Arc<History>,
    stopped: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let masters = cluster.master_addrs.clone();
    let pservers = cluster.pserver_addrs.iter().cloned().zip(cluster.pserver_jobs.iter().cloned());
    let pservers = pservers.collect();
    tokio::spawn(observers::observe(history.clone(), masters, pservers, stopped))
}

/// The training job (or each of `options.jobs` jobs at once) under the schedule: trainers
/// until they finish, then each job's model accuracy against one process's on its data.
async fn drive_training(
    cluster: &mut Cluster,
    options: &RunOptions,
) -> anyhow::Result<(Arc<History>, Vec<TrainingResult>)> {
    let passes = training::passes_for(options.schedule.end_ms());
    let jobs = training::job_names(options.jobs);
    let mut datasets = Vec::new();
    for (offset, job) in (0..).zip(&jobs) {
        let dir = training::job_dir(&options.dir, job.as_deref());
        let data = training::write_dataset(&options.binary, &dir, passes, offset)?;
        let copy =
            training::TrainingData { train: data.train.clone(), eval: data.eval.clone(), passes };
        let baseline = tokio::task::spawn_blocking(move || training::baseline_accuracy(&copy));
        datasets.push((job.clone(), dir, data, baseline));
    }
    wait_for_leader(cluster, Duration::from_secs(60)).await?;
    // Named jobs are submitted before anything watches or trains, so every status read sees
    // all of them (the trainers' reports then repeat their job's dataset).
    let submitter = cluster.client(Duration::from_secs(60))?;
    for (job, _, data, _) in &datasets {
        let Some(name) = job else { continue };
        let dataset = client::JobDataset::RecordIo { patterns: vec![data.train.clone()] };
        let spec = client::JobSpec {
            job: name.clone(),
            dataset,
            passes,
            policy: Default::default(),
            restart: false,
            shuffle_seed: None,
        };
        submitter.submit_job(&spec).await.with_context(|| format!("submit job {name}"))?;
    }
    // A trainer's view of the data can break only if it has a mount namespace of its own.
    let private_mounts =
        options.schedule.steps.iter().any(|step| step.fault == Fault::BreakTrainerData);
    for (job, dir, data, _) in &datasets {
        for index in 0..training::TRAINERS {
            let args =
                training::trainer_args((index, job.as_deref()), &cluster.master_addrs, data, dir);
            cluster.add_trainer(args, private_mounts)?;
        }
    }
    let history = Arc::new(History::new());
    let (stop, stopped) = watch::channel(false);
    let observers = spawn_observers(cluster, &history, stopped);
    let faults = run_schedule(cluster, &options.schedule, &history).await;
    let finished = training::wait_until(Duration::from_secs(TRAINING_FINISH_S), || {
        cluster.record_exits(&history);
        cluster.trainers_done()
    })
    .await;
    let _ = stop.send(true);
    let _ = observers.await;
    faults?;
    finished?;
    final_reads(cluster, &history).await;
    let mut results = Vec::new();
    for (job, dir, data, baseline) in datasets {
        let baseline_accuracy = baseline.await.context("the baseline panicked")??;
        results.push(evaluate_job(
            options,
            job.unwrap_or_default(),
            &dir,
            &data,
            baseline_accuracy,
        )?);
    }
    Ok((history, results))
}

/// A job's result: the first model its trainers wrote, evaluated on its held-out set.
fn evaluate_job(
    options: &RunOptions,
    job: String,
    dir: &std::path::Path,
    data: &training::TrainingData,
    baseline_accuracy: f64,
) -> anyhow::Result<TrainingResult> {
    let model = (0..training::TRAINERS)
        .map(|index| training::model_path(dir, index))
        .find(|path| path.is_file());
    let accuracy = match model {
        Some(model) => Some(training::evaluate(&options.binary, &model, &data.eval)?),
        None => None,
    };
    Ok(TrainingResult {
        job,
        accuracy: accuracy.unwrap_or(0.0),
        baseline_accuracy,
        bound: TRAINING_ACCURACY_BOUND,
        model_written: accuracy.is_some(),
    })
}

async fn wait_for_leader(cluster: &Cluster, limit: Duration) -> anyhow::Result<usize> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(leader) = cluster.leader().await {
            return Ok(leader);
        }
        anyhow::ensure!(Instant::now() < deadline, "no master leader within {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Follows the schedule, recording each fault's start and heal, and every process exit.
async fn run_schedule(
    cluster: &mut Cluster,
    schedule: &Schedule,
    history: &History,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(schedule.seed ^ 0x006e_656d_6573_6973);
    for step in &schedule.steps {
        if !cluster.trainers.is_empty() && cluster.trainers_done()? {
            break;
        }
        let wait_ms = step.start_ms.saturating_sub(history.now_ms());
        watch_exits(cluster, history, Duration::from_millis(wait_ms)).await;
        let targets = nemesis::targets(cluster, step.fault, &mut rng, history).await?;
        let recorded: Vec<u64> = targets.iter().map(|index| *index as u64).collect();
        let event = |phase| Operation::Nemesis {
            fault: step.fault.name().to_string(),
            targets: recorded.clone(),
            phase,
        };
        let started = Instant::now();
        history.record(NEMESIS_PROCESS, OpKind::Info, event(Phase::Start), Value::None);
        let active = nemesis::apply(cluster, step.fault, &targets, history, &mut rng).await?;
        tracing::info!(fault = step.fault.name(), ?targets, how = active.how, "nemesis: start");
        let hold = Duration::from_millis(step.hold_ms).saturating_sub(started.elapsed());
        nemesis::hold(cluster, &active, hold, &mut rng, history).await?;
        nemesis::heal(cluster, &active)?;
        revive_pservers(cluster)?;
        cluster.record_exits(history);
        let note = active.how.map_or(Value::None, |how| Value::Note { note: how.to_string() });
        history.record(NEMESIS_PROCESS, OpKind::Info, event(Phase::Stop), note);
        tracing::info!(fault = step.fault.name(), "nemesis: healed");
    }
    Ok(())
}

/// Waits `duration`, recording process exits as they happen.
async fn watch_exits(cluster: &mut Cluster, history: &History, duration: Duration) {
    let deadline = Instant::now() + duration;
    loop {
        cluster.record_exits(history);
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left.min(Duration::from_millis(EXIT_POLL_MS))).await;
    }
}

/// Starts again, as standbys, pservers that exited because their slot went elsewhere.
fn revive_pservers(cluster: &mut Cluster) -> anyhow::Result<()> {
    for index in 0..cluster.pservers.len() {
        if !cluster.is_pserver_running(index) {
            cluster.restart_pserver(index)?;
        }
    }
    Ok(())
}

/// A last status read and member list, then every master's digest once their applied indexes agree (or
/// after ten seconds, whatever they are). The leader still writes after the clients stop (a
/// lost trainer's lease ends), so an entry can commit between two masters' digest reads: the
/// reads are taken again until one round finds every master at the same index.
async fn final_reads(cluster: &Cluster, history: &History) {
    let _ = observers::read_status(history, &cluster.master_addrs).await;
    let _ = observers::read_members(history, &cluster.master_addrs).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        while Instant::now() < deadline && !applied_indexes_agree(cluster).await {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let read = observers::read_digests(history, &cluster.master_addrs).await;
        let agreed = read.is_ok_and(|indexes| {
            let answered: Vec<u64> = indexes.into_iter().flatten().collect();
            answered.windows(2).all(|pair| pair[0] == pair[1])
        });
        if agreed || Instant::now() >= deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn applied_indexes_agree(cluster: &Cluster) -> bool {
    let Ok(client) = cluster.client(Duration::from_secs(1)) else { return false };
    let mut indexes = Vec::new();
    for addr in cluster.master_addrs.iter().take(MASTER_COUNT) {
        match client.member_info(addr).await {
            Ok(info) => indexes.push(info.last_applied_index),
            Err(_) => return false,
        }
    }
    indexes.windows(2).all(|pair| pair[0] == pair[1])
}
