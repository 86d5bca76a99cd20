//! The demo's loop: poll the masters' status, draw it, strike the planned faults, wait for the
//! trainers to finish; then the summary.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use client::JobStatus;
use client::{ClientOptions, MasterClient};
use indicatif::MultiProgress;
use platform::security::Security;

use super::cluster::{DemoCluster, Job};
use super::display::Display;
use super::faults::{Fault, FaultRecord};
use super::DemoArgs;
use trainer::model::Evaluation;

/// Status polls: also the resolution of the recovery times shown.
const POLL_MS: u64 = 100;

pub async fn run(
    args: &DemoArgs,
    mut cluster: DemoCluster,
    jobs: &[Job],
    work: &Path,
    security: Security,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let options = ClientOptions {
        rpc_timeout: Duration::from_secs(1),
        call_deadline: Some(Duration::from_secs(2)),
        security,
        ..ClientOptions::default()
    };
    let master = MasterClient::new(&cluster.master_addrs, options)?;
    let baselines: Vec<_> = jobs.iter().map(baseline).collect();
    let plan: Vec<(Fault, f64)> = if args.no_faults { Vec::new() } else { Fault::PLAN.to_vec() };
    let mut records: Vec<FaultRecord> = Vec::new();
    let bars = Display::bars();
    let mut displays: Vec<Option<Display>> = jobs.iter().map(|_| None).collect();
    let shutdown = crate::shutdown::signal_received();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => {
                cluster.processes.terminate_all(Duration::from_secs(3));
                anyhow::bail!("interrupted; every child process was stopped");
            }
            () = tokio::time::sleep(Duration::from_millis(POLL_MS)) => {}
        }
        let first = observe_jobs(&master, (args, jobs), &bars, &mut displays).await;
        // The faults strike the first job (and the group's leader), by its progress.
        if let (Some((status, progress)), Some(display)) = (first, displays[0].as_ref()) {
            let term = status.group.term;
            records.iter_mut().for_each(|record| record.observe(progress.finished, term));
            if let Some(&(fault, share)) = plan.get(records.len()) {
                if progress.finished as f64 >= share * progress.total as f64 && !status.job_finished
                {
                    let record = strike(fault, &mut cluster, &status, progress.finished)?;
                    display.announce(&format!("fault: {} ({})", fault.describe(), record.detail));
                    records.push(record);
                }
            }
        }
        if cluster.trainers_done()? {
            displays.iter().flatten().for_each(Display::finish);
            break;
        }
    }
    report(&master, jobs, (baselines, &records), started, work).await?;
    if args.keep {
        keep_dashboard_up(&mut cluster).await;
    }
    Ok(())
}

/// Updates every job's display from the masters' status; the first job's status and
/// progress, once it shows any.
async fn observe_jobs(
    master: &MasterClient,
    (args, jobs): (&DemoArgs, &[Job]),
    bars: &MultiProgress,
    displays: &mut [Option<Display>],
) -> Option<(JobStatus, Progress)> {
    let mut first = None;
    for (index, job) in jobs.iter().enumerate() {
        let Ok(status) = master.status_of(&job.name).await else { continue };
        let Some(progress) = Progress::of(&status, job.passes) else { continue };
        let display = displays[index].get_or_insert_with(|| {
            let per_task = args.examples as f64 / progress.per_pass as f64;
            Display::new(bars, &label(jobs, job), job.passes, (progress.per_pass, per_task))
        });
        display.update(&status, progress.finished);
        if index == 0 {
            first = Some((status, progress));
        }
    }
    first
}

/// The end of the demo: its time, each job's accuracy against its one-process baseline, each
/// fault's recovery, and where the logs are.
async fn report(
    master: &MasterClient,
    jobs: &[Job],
    (baselines, records): (Vec<Baseline>, &[FaultRecord]),
    started: Instant,
    work: &Path,
) -> anyhow::Result<()> {
    let seconds = started.elapsed().as_secs_f64();
    match jobs.len() {
        1 => println!("\njob finished in {seconds:.1} s"),
        count => println!("\nall {count} jobs finished in {seconds:.1} s"),
    }
    for (job, baseline) in jobs.iter().zip(baselines) {
        let baseline = baseline.await.context("the baseline panicked")??;
        let named = match jobs.len() {
            1 => "the job".to_string(),
            _ => format!("job {}", job.name),
        };
        summary(master, (job, &named), baseline, work).await?;
    }
    for record in records {
        println!("fault: {}", record.summary());
    }
    println!("logs: {}", work.join("logs").display());
    Ok(())
}

/// With `--keep`: the masters (and the pservers, whose slots they show) stay up, and with
/// them the dashboards, until Ctrl-C or SIGTERM.
async fn keep_dashboard_up(cluster: &mut DemoCluster) {
    println!("dashboard kept up (at the addresses above) until Ctrl-C");
    crate::shutdown::signal_received().await;
    cluster.processes.terminate_all(Duration::from_secs(3));
}

/// What a job's bars are labelled with: its name when the demo trains several.
fn label(jobs: &[Job], job: &Job) -> String {
    match jobs.len() {
        1 => String::new(),
        _ => format!("{:<6} ", job.name),
    }
}

/// The job's size and progress as the status shows it.
struct Progress {
    per_pass: u64,
    total: u64,
    finished: u64,
}

impl Progress {
    fn of(status: &JobStatus, passes: u32) -> Option<Self> {
        let per_pass = status.todo + status.pending + status.done + status.failed;
        if per_pass == 0 {
            return None;
        }
        let total = per_pass * u64::from(passes);
        let finished = if status.job_finished {
            total
        } else {
            u64::from(status.pass) * per_pass + status.done + status.failed
        };
        Some(Self { per_pass, total, finished })
    }
}

/// Breaks what `fault` names (in the first job) and starts it again; the record to watch its
/// recovery.
fn strike(
    fault: Fault,
    cluster: &mut DemoCluster,
    status: &JobStatus,
    finished: u64,
) -> anyhow::Result<FaultRecord> {
    let (leader, term) = (status.group.leader_id.unwrap_or(0), status.group.term);
    let (process, detail) = match fault {
        Fault::Leader => (
            cluster.master_process(leader.saturating_sub(1) as usize),
            format!("master {leader}, term {term}"),
        ),
        Fault::Trainer => (cluster.trainer_process(0, 0), "trainer 0".to_string()),
        Fault::Pserver => (cluster.pserver_process(0, 0), "pserver 0".to_string()),
    };
    cluster.processes.kill(process);
    cluster.processes.spawn(process)?;
    Ok(FaultRecord::new(fault, detail, finished, term))
}

/// The one-process training of a job, for comparison, running beside the demo.
type Baseline = tokio::task::JoinHandle<anyhow::Result<Evaluation>>;

/// The single-process run's accuracy on the job's data, computed while the cluster trains.
fn baseline(job: &Job) -> Baseline {
    let (train, eval, model, classes, passes) =
        (job.train.clone(), job.eval.clone(), job.model.clone(), job.classes as usize, job.passes);
    tokio::task::spawn_blocking(move || {
        let kind = model.parse().map_err(anyhow::Error::msg)?;
        let config = trainer::model::ModelConfig {
            kind,
            features: super::FEATURES as usize,
            classes,
            hidden: 64,
        };
        let optimizer =
            optimizer::OptimizerConfig { learning_rate: 0.05, kind: optimizer::OptimizerKind::Sgd };
        let batches = trainer::local::load_batches(&config, &[train], 32)?;
        let run = trainer::local::train_locally(&config, &optimizer, &batches, passes, 1)?;
        trainer::evaluation::evaluate_dataset(&config, &run.params, &[eval])
    })
}

/// One job's result: its passes, retries, and accuracy against one process on its data.
async fn summary(
    master: &MasterClient,
    (job, named): (&Job, &str),
    baseline: Evaluation,
    work: &Path,
) -> anyhow::Result<()> {
    let status = master.status_of(&job.name).await.context("read the final status")?;
    anyhow::ensure!(
        status.job_finished,
        "the trainers exited but job {} is not finished",
        job.name
    );
    let per_pass = status.done + status.failed;
    let retried = status.dispatched.saturating_sub(per_pass * u64::from(status.passes));
    println!(
        "{named}: {} passes of {per_pass} tasks; {} dispatched, {retried} of them retries (timed out, failed or a killed trainer's); {} failed",
        status.passes,
        status.dispatched,
        status.failed
    );
    match (status.eval.as_ref(), baseline.accuracy()) {
        (Some(eval), Some(local)) => {
            let points = 100.0 * (f64::from(eval.accuracy) - local);
            println!("  accuracy {:.4} (loss {:.4}); one process, same model and data: {local:.4} ({points:+.2} points)", eval.accuracy, eval.loss);
        }
        (Some(eval), None) => println!(
            "  loss {:.4}; one process, same model and data: {:.4} (regression: no accuracy)",
            eval.loss, baseline.loss
        ),
        (None, _) => println!("  no evaluation was recorded"),
    }
    let model = work.join(&job.name).join("model-0.safetensors");
    println!(
        "  model: {} (raftrain eval --model {} --dataset {})",
        model.display(),
        model.display(),
        job.eval
    );
    Ok(())
}
