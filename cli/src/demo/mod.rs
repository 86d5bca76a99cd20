//! `raftrain demo`: the whole promise in one command. Writes the embedded default dataset
//! (`recordio synth` blobs; one per job with `--jobs N`, each of its own seed), starts 3
//! masters and, per job, its pservers and trainers as child processes on loopback, kills the
//! master leader and the first job's trainer and pserver while they train (announcing each and
//! restarting it), shows every job's progress side by side, and ends with each job's accuracy
//! against a single-process run on its data, each fault's recovery time, and where the logs
//! and the models are. Every master serves its dashboard, whose address it prints; with
//! `--keep` the masters and their dashboards stay up after the run until Ctrl-C. Ctrl-C or
//! SIGTERM stops every child.

mod cluster;
mod display;
mod faults;
mod run_loop;

use anyhow::Context as _;
use clap::Args;
use platform::security::SecurityFiles;

use cluster::{DemoCluster, Job};

#[derive(Debug, Args)]
pub(crate) struct DemoArgs {
    /// Keep the work directory (dataset, logs, checkpoints, saved models) after the run, and
    /// the masters with their dashboards up until Ctrl-C.
    #[arg(long)]
    keep: bool,
    /// Run without killing anything.
    #[arg(long)]
    no_faults: bool,
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=16))]
    trainers: u32,
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=8))]
    pservers: u32,
    /// The model: softmax, logistic, linear or mlp.
    #[arg(long, default_value = "softmax", value_parser = ["softmax", "mlp", "logistic", "linear"])]
    model: String,
    /// Training examples in the generated dataset.
    #[arg(long, default_value_t = 200_000)]
    examples: u64,
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    passes: u32,
    /// Jobs trained at once on the one master group, each with its own dataset, pservers
    /// (--pservers of them) and trainers (--trainers).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=4))]
    jobs: u32,
    /// Run with TLS (a throwaway CA and certificate) and a cluster token on every connection,
    /// generated into the work directory's `secure/`.
    #[arg(long, conflicts_with_all = ["tls_cert", "tls_key", "tls_ca", "token_file"])]
    secure: bool,
    #[command(flatten)]
    security: SecurityFiles,
}

/// The embedded default dataset: three overlapping Gaussian blobs in 10 features.
const FEATURES: u32 = 10;
const CLASSES: u32 = 3;
const NOISE: &str = "2.5";
const SEED: u64 = 7;

pub(crate) fn run(args: &DemoArgs) -> anyhow::Result<()> {
    let work = tempfile::Builder::new()
        .prefix("raftrain-demo-")
        .tempdir()
        .context("create the work directory")?;
    println!("raftrain demo: work directory {}", work.path().display());
    let result = demo(args, work.path());
    if args.keep || result.is_err() {
        let kept = work.keep();
        println!(
            "work directory kept: {} (logs in logs/, each job's model in <job>/model-0.safetensors)",
            kept.display()
        );
    } else {
        println!("work directory removed with its logs and model (pass --keep to keep them)");
    }
    result
}

fn demo(args: &DemoArgs, work: &std::path::Path) -> anyhow::Result<()> {
    let kind = args.model.as_str();
    let classes = if matches!(kind, "logistic" | "linear") { 2 } else { CLASSES };
    let mut jobs = Vec::new();
    for index in 0..args.jobs {
        let name = job_name(args.jobs, index);
        let (train, eval) = write_dataset(args, &work.join(&name), u64::from(index))?;
        jobs.push(Job { name, train, eval, model: kind.to_string(), classes, passes: args.passes });
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let security = match args.secure {
        true => crate::certs::generate(&work.join("secure"), &["127.0.0.1".to_string()])
            .context("generate --secure's certificates")?,
        false => args.security.clone(),
    };
    // Checked here, before any child starts, so a bad file is named once.
    let client_security = platform::security::Security::load(&security)?;
    let (pservers, trainers) = (args.pservers as usize, args.trainers as usize);
    let cluster = DemoCluster::start(work, pservers, trainers, &jobs, &security)?;
    println!(
        "started {} masters and, for each of {} job(s), {} pservers and {} trainers; training {kind} on {} examples for {} passes",
        cluster::MASTER_COUNT,
        jobs.len(),
        args.pservers,
        args.trainers,
        args.examples,
        args.passes
    );
    let scheme = if client_security.tls().is_some() { "https" } else { "http" };
    let dashboards: Vec<String> =
        cluster.dashboard_addrs.iter().map(|addr| format!("{scheme}://{addr}/")).collect();
    println!("dashboard: {} (every master serves one: {})", dashboards[0], dashboards.join(" "));
    runtime.block_on(run_loop::run(args, cluster, &jobs, work, client_security))
}

/// Job `index` of `count`: `job` alone (the trainers' default), `job-1`, `job-2`, ... together.
fn job_name(count: u32, index: u32) -> String {
    match count {
        1 => "job".to_string(),
        _ => format!("job-{}", index + 1),
    }
}

/// `recordio synth` into `<dir>/data`, with the embedded seed moved by `seed_offset`; the train
/// and eval file paths.
fn write_dataset(
    args: &DemoArgs,
    dir: &std::path::Path,
    seed_offset: u64,
) -> anyhow::Result<(String, String)> {
    let data = dir.join("data");
    let seed = (SEED + seed_offset).to_string();
    let kind = if args.model == "linear" { "linear" } else { "blobs" };
    let classes = if args.model == "logistic" { 2 } else { CLASSES };
    let (examples, features, classes, out) = (
        args.examples.to_string(),
        FEATURES.to_string(),
        classes.to_string(),
        data.display().to_string(),
    );
    let synth = [
        "recordio",
        "synth",
        "--kind",
        kind,
        "--examples",
        &examples,
        "--features",
        &features,
        "--classes",
        &classes,
        "--noise",
        NOISE,
        "--seed",
        &seed,
        "--out",
        &out,
    ];
    crate::process_group::run_raftrain(&synth.map(str::to_string))?;
    Ok((
        data.join("train.recordio").display().to_string(),
        data.join("eval.recordio").display().to_string(),
    ))
}
