//! `bench trainer`: examples/s of real trainer processes (1, 2 and 4, with one master and one
//! pserver) against a single-process loop training the same model on the same data in memory,
//! measured in the same run: softmax regression and a small MLP on 100 features (toys whose
//! batch takes tens of microseconds, so they measure a round trip to the pserver), and a wide
//! MLP whose batch takes about a millisecond in memory (so the ratio measures the system).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context as _;
use clap::Args;
use optimizer::{OptimizerConfig, OptimizerKind};
use trainer::local::{load_batches, train_locally};
use trainer::model::{ModelConfig, ModelKind};

use super::process_logs::ProcessLogs;
use super::table::Table;
use crate::process_group::{free_loopback_addrs, run_raftrain, ProcessGroup};

#[derive(Debug, Args)]
pub(crate) struct TrainerBenchArgs {
    /// Training examples in each synthetic dataset.
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
    /// The trainers' --staleness values (each row runs with each): 0 waits for every push and
    /// pull, 1 overlaps them with the next batch.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    staleness: Vec<u32>,
    /// The models: softmax, mlp (both on 100 features) and wide (an MLP whose batch takes
    /// about a millisecond).
    #[arg(long, value_delimiter = ',', default_value = "softmax,mlp,wide")]
    models: Vec<String>,
}

const CLASSES: usize = 10;
/// The toys' inputs and the small MLP's hidden layer.
const TOY_FEATURES: usize = 100;
const TOY_HIDDEN: usize = 64;
/// The wide MLP: 300 inputs and 300 hidden units cost about a millisecond a batch of 64 on
/// the development machine (the table prints the measured time).
const WIDE_FEATURES: usize = 500;
const WIDE_HIDDEN: usize = 500;
/// 1 MiB chunks of 100 features (more for more features): about 2,000 examples a task for
/// every model, so a task's two master writes are amortized as in a real job (the default
/// 16 KiB chunks of `synth` make 33-example tasks, which measure the master's write latency
/// instead).
const CHUNK_BYTES_PER_100_FEATURES: usize = 1 << 20;

/// One model of the table and the dataset it trains on.
struct BenchModel {
    name: &'static str,
    config: ModelConfig,
    train: String,
}

pub(crate) fn run(args: &TrainerBenchArgs) -> anyhow::Result<()> {
    let root = tempfile::tempdir().context("create a temporary directory")?;
    let mut logs = ProcessLogs::create("trainer", args.log_dir.as_deref())?;
    let mut table = Table::new(&[
        "model",
        "batch ms",
        "trainers",
        "push/pull every",
        "staleness",
        "examples/s",
        "single process",
        "vs single",
    ]);
    for name in &args.models {
        let model = bench_model(name, root.path(), args)?;
        let local = local_rate(&model.config, &model.train, args)?;
        let batch_ms = 1000.0 * args.batch_size as f64 / local;
        for &trainers in &args.trainers {
            for every in [1, args.every] {
                for &staleness in &args.staleness {
                    let run = Run { trainers, every, staleness };
                    let label = format!(
                        "{}-trainers-{trainers}-every-{every}-staleness-{staleness}",
                        model.name.replace(' ', "-")
                    );
                    let places = (root.path(), logs.cluster(&label)?);
                    let rate = distributed_rate(&model, args, run, places)?;
                    let cells = [
                        model.name.to_string(),
                        format!("{batch_ms:.3}"),
                        trainers.to_string(),
                        every.to_string(),
                        staleness.to_string(),
                        format!("{rate:.0}"),
                        format!("{local:.0}"),
                        format!("{:.0}%", 100.0 * rate / local),
                    ];
                    table.row(cells.to_vec());
                }
            }
        }
    }
    println!("{}", table.render());
    Ok(())
}

/// The model named `name` and its synthetic dataset, written under `root`.
fn bench_model(name: &str, root: &Path, args: &TrainerBenchArgs) -> anyhow::Result<BenchModel> {
    let (label, kind, features, hidden) = match name {
        "softmax" => ("softmax", ModelKind::Softmax, TOY_FEATURES, TOY_HIDDEN),
        "mlp" => ("mlp", ModelKind::Mlp, TOY_FEATURES, TOY_HIDDEN),
        "wide" => ("wide mlp", ModelKind::Mlp, WIDE_FEATURES, WIDE_HIDDEN),
        other => anyhow::bail!("unknown bench model {other:?}: use softmax, mlp or wide"),
    };
    let data = root.join(format!("data-{features}"));
    let train = data.join("train.recordio");
    if !train.exists() {
        synthesize(&data, features, args.examples)?;
    }
    let config = ModelConfig { kind, features, classes: CLASSES, hidden };
    Ok(BenchModel { name: label, config, train: train.display().to_string() })
}

/// `recordio synth`: `examples` examples of `features` features in `CLASSES` classes.
fn synthesize(out: &Path, features: usize, examples: u64) -> anyhow::Result<()> {
    let synth = [
        "recordio".to_string(),
        "synth".into(),
        "--examples".into(),
        examples.to_string(),
        "--features".into(),
        features.to_string(),
        "--classes".into(),
        CLASSES.to_string(),
        "--noise".into(),
        "3".into(),
        "--out".into(),
        out.display().to_string(),
        "--max-chunk-bytes".into(),
        (CHUNK_BYTES_PER_100_FEATURES * features / 100).to_string(),
    ];
    run_raftrain(&synth)
}

/// Examples/s of the in-memory loop (training only; the data is read first).
fn local_rate(model: &ModelConfig, train: &str, args: &TrainerBenchArgs) -> anyhow::Result<f64> {
    let batches = load_batches(model, &[train.to_string()], args.batch_size)?;
    let optimizer = OptimizerConfig { learning_rate: 0.05, kind: OptimizerKind::Sgd };
    let run = train_locally(model, &optimizer, &batches, args.passes, 1)?;
    Ok(run.examples as f64 / run.elapsed.as_secs_f64())
}

/// One row's trainer settings.
#[derive(Clone, Copy)]
struct Run {
    trainers: usize,
    every: usize,
    staleness: u32,
}

/// Examples/s of the row's trainer processes: the sum of each one's rate while on tasks
/// (start-up and waiting for others excluded, as the local loop excludes reading).
fn distributed_rate(
    model: &BenchModel,
    args: &TrainerBenchArgs,
    run: Run,
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
    let mut children = Vec::with_capacity(run.trainers);
    for _ in 0..run.trainers {
        children.push(trainer_command(model, args, run, &addrs[0])?.spawn()?);
    }
    let mut total = 0.0;
    for child in children {
        let output = child.wait_with_output()?;
        anyhow::ensure!(output.status.success(), "a trainer failed");
        total += reported_rate(&String::from_utf8_lossy(&output.stdout))?;
    }
    Ok(total)
}

fn trainer_command(
    model: &BenchModel,
    args: &TrainerBenchArgs,
    run: Run,
    master: &str,
) -> anyhow::Result<Command> {
    let mut command = Command::new(std::env::current_exe()?);
    command
        .args(["trainer", "--masters", master, "--dataset", &model.train])
        .args(["--model", model.config.kind.name()])
        .args(["--features", &model.config.features.to_string()])
        .args(["--hidden", &model.config.hidden.to_string()])
        .args(["--classes", &CLASSES.to_string(), "--passes", &args.passes.to_string()])
        .args(["--batch-size", &args.batch_size.to_string()])
        .args(["--push-every", &run.every.to_string(), "--pull-every", &run.every.to_string()])
        .args(["--staleness", &run.staleness.to_string(), "--learning-rate", "0.05"])
        .env("RAFTRAIN_LOG", "warn")
        .stdout(Stdio::piped());
    Ok(command)
}

/// The "(N examples/s)" a trainer prints at the end: its rate while working on tasks.
fn reported_rate(stdout: &str) -> anyhow::Result<f64> {
    let before =
        stdout.split(" examples/s)").next().context("no examples/s in the trainer's summary")?;
    let number = before.rsplit('(').next().context("no examples/s in the trainer's summary")?;
    number.trim().parse().with_context(|| format!("not a rate: {number:?}"))
}
