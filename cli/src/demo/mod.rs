//! `raftrain demo`: the whole promise in one command. Writes the embedded default dataset
//! (`recordio synth` blobs), starts 3 masters, the pservers and the trainers as child processes
//! on loopback, kills the master leader, a trainer and a pserver while they train (announcing
//! each and restarting it), shows the job's progress, and ends with the accuracy against a
//! single-process run on the same data, each fault's recovery time, and where the logs and the
//! model are. Ctrl-C or SIGTERM stops every child.

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
    /// Keep the work directory (dataset, logs, checkpoints, saved models) after the run.
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
const SEED: &str = "7";

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
            "work directory kept: {} (logs in logs/, the model in model-0.safetensors)",
            kept.display()
        );
    } else {
        println!("work directory removed with its logs and model (pass --keep to keep them)");
    }
    result
}

fn demo(args: &DemoArgs, work: &std::path::Path) -> anyhow::Result<()> {
    let (train, eval) = write_dataset(args, work)?;
    let kind = args.model.as_str();
    let classes = if matches!(kind, "logistic" | "linear") { 2 } else { CLASSES };
    let job = Job { train: &train, eval: &eval, model: kind, classes, passes: args.passes };
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
    let cluster = DemoCluster::start(work, pservers, trainers, &job, &security)?;
    println!("started {} masters, {} pservers and {} trainers; training {kind} on {} examples for {} passes", cluster::MASTER_COUNT, args.pservers, args.trainers, args.examples, args.passes);
    runtime.block_on(run_loop::run(args, cluster, &job, work, client_security))
}

/// `recordio synth` into `<work>/data`; the train and eval file paths.
fn write_dataset(args: &DemoArgs, work: &std::path::Path) -> anyhow::Result<(String, String)> {
    let data = work.join("data");
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
        SEED,
        "--out",
        &out,
    ];
    crate::process_group::run_raftrain(&synth.map(str::to_string))?;
    Ok((
        data.join("train.recordio").display().to_string(),
        data.join("eval.recordio").display().to_string(),
    ))
}
