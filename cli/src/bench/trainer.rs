//! `bench trainer`: examples/s of real trainer processes (1, 2 and 4, with one master and one
//! pserver) against a single-process loop training the same model on the same data in memory,
//! measured in the same run, for softmax regression on 100 features and for the MLP.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context as _;
use clap::Args;
use pserver::optimizer::{OptimizerConfig, OptimizerKind};
use trainer::local::{load_batches, train_locally};
use trainer::model::{ModelConfig, ModelKind};

use super::process_logs::ProcessLogs;
use super::table::Table;
use crate::process_group::{free_loopback_addrs, run_raftrain, ProcessGroup};

#[derive(Debug, Args)]
pub(crate) struct TrainerBenchArgs {
    /// Training examples in the synthetic dataset.
    #[arg(long, default_value_t = 50_000)]
    examples: u64,
    /// Passes over it per run.
    #[arg(long, default_value_t = 5)]
    passes: u32,
    /// Trainer counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    trainers: Vec<usize>,
    /// Push and pull every this many batches (each row runs with 1 and with this).
    #[arg(long, default_value_t = 10)]
    every: usize,
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Where each run's master and pserver log, one subdirectory per run, kept after the
    /// benchmark (default: a new directory under the system's temporary directory; either is
    /// named on standard error). The trainers log to standard error.
    #[arg(long)]
    log_dir: Option<std::path::PathBuf>,
}

const FEATURES: usize = 100;
const CLASSES: usize = 10;
/// 1 MiB chunks: about 2,000 examples a task, so a task's two master writes are amortized as
/// in a real job (the default 16 KiB chunks of `synth` make 33-example tasks, which measure the
/// master's write latency instead).
const CHUNK_BYTES: usize = 1 << 20;

pub(crate) fn run(args: &TrainerBenchArgs) -> anyhow::Result<()> {
    let root = tempfile::tempdir().context("create a temporary directory")?;
    let mut logs = ProcessLogs::create("trainer", args.log_dir.as_deref())?;
    let data = root.path().join("data");
    let (examples, out, features, classes) = (
        args.examples.to_string(),
        data.display().to_string(),
        FEATURES.to_string(),
        CLASSES.to_string(),
    );
    let synth = [
        "recordio",
        "synth",
        "--examples",
        &examples,
        "--features",
        &features,
        "--classes",
        &classes,
        "--noise",
        "3",
        "--out",
        &out,
    ];
    let chunk_bytes = CHUNK_BYTES.to_string();
    run_raftrain(
        &synth
            .iter()
            .chain(&["--max-chunk-bytes", chunk_bytes.as_str()])
            .map(|arg| arg.to_string())
            .collect::<Vec<_>>(),
    )?;
    let train = data.join("train.recordio").display().to_string();
    let mut table = Table::new(&[
        "model",
        "trainers",
        "push/pull every",
        "examples/s",
        "single process",
        "vs single",
    ]);
    for kind in [ModelKind::Softmax, ModelKind::Mlp] {
        let model = ModelConfig { kind, features: FEATURES, classes: CLASSES, hidden: 64 };
        let local = local_rate(&model, &train, args)?;
        for &trainers in &args.trainers {
            for every in [1, args.every] {
                let label = format!("{}-trainers-{trainers}-every-{every}", kind.name());
                let places = (root.path(), logs.cluster(&label)?);
                let rate = distributed_rate(&model, &train, args, (trainers, every), places)?;
                let cells = [
                    kind.name().to_string(),
                    trainers.to_string(),
                    every.to_string(),
                    format!("{rate:.0}"),
                    format!("{local:.0}"),
                    format!("{:.0}%", 100.0 * rate / local),
                ];
                table.row(cells.to_vec());
            }
        }
    }
    println!("{}", table.render());
    Ok(())
}

/// Examples/s of the in-memory loop (training only; the data is read first).
fn local_rate(model: &ModelConfig, train: &str, args: &TrainerBenchArgs) -> anyhow::Result<f64> {
    let batches = load_batches(model, &[train.to_string()], args.batch_size)?;
    let optimizer = OptimizerConfig { learning_rate: 0.05, kind: OptimizerKind::Sgd };
    let run = train_locally(model, &optimizer, &batches, args.passes, 1)?;
    Ok(run.examples as f64 / run.elapsed.as_secs_f64())
}

/// Examples/s of `trainers` trainer processes: the sum of each one's rate while on tasks
/// (start-up and waiting for others excluded, as the local loop excludes reading).
fn distributed_rate(
    model: &ModelConfig,
    train: &str,
    args: &TrainerBenchArgs,
    (trainers, every): (usize, usize),
    (root, log_dir): (&Path, std::path::PathBuf),
) -> anyhow::Result<f64> {
    let dir = tempfile::tempdir_in(root)?;
    let addrs = free_loopback_addrs(2)?;
    let master = [
        "master",
        "--id",
        "1",
        "--listen",
        &addrs[0],
        "--peers",
        &format!("1={}", addrs[0]),
        "--data-dir",
        &dir.path().join("m").display().to_string(),
    ];
    let pserver = [
        "pserver",
        "--masters",
        &addrs[0],
        "--listen",
        &addrs[1],
        "--num-pservers",
        "1",
        "--checkpoint-dir",
        &dir.path().join("c").display().to_string(),
    ];
    let strings = |args: &[&str]| args.iter().map(|arg| arg.to_string()).collect::<Vec<_>>();
    let _cluster = ProcessGroup::start(vec![strings(&master), strings(&pserver)], &log_dir)?;
    let exe = std::env::current_exe()?;
    let children: Vec<_> = (0..trainers)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "trainer",
                    "--masters",
                    &addrs[0],
                    "--dataset",
                    train,
                    "--model",
                    model.kind.name(),
                ])
                .args([
                    "--classes",
                    &CLASSES.to_string(),
                    "--passes",
                    &args.passes.to_string(),
                    "--batch-size",
                    &args.batch_size.to_string(),
                ])
                .args([
                    "--push-every",
                    &every.to_string(),
                    "--pull-every",
                    &every.to_string(),
                    "--learning-rate",
                    "0.05",
                ])
                .env("RAFTRAIN_LOG", "warn")
                .stdout(Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let mut total = 0.0;
    for child in children {
        let output = child.wait_with_output()?;
        anyhow::ensure!(output.status.success(), "a trainer failed");
        total += reported_rate(&String::from_utf8_lossy(&output.stdout))?;
    }
    Ok(total)
}

/// The "(N examples/s)" a trainer prints at the end: its rate while working on tasks.
fn reported_rate(stdout: &str) -> anyhow::Result<f64> {
    let before =
        stdout.split(" examples/s)").next().context("no examples/s in the trainer's summary")?;
    let number = before.rsplit('(').next().context("no examples/s in the trainer's summary")?;
    number.trim().parse().with_context(|| format!("not a rate: {number:?}"))
}
