//! The training workload: a whole job (real `raftrain trainer` processes against the
//! cluster's pservers), or several named jobs at once on the one master group (`--jobs`),
//! under the nemesis, then each trained model's accuracy on its held-out set against a
//! single-process run on the same data (the fault-free answer).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

/// The job: three overlapping Gaussian blobs in ten features (the demo's embedded dataset).
pub const FEATURES: u32 = 10;
pub const CLASSES: u32 = 3;
/// The fewest passes a job trains; a longer schedule trains one pass per second of it, so
/// the job outlasts most of its faults.
pub const PASSES_MIN: u32 = 4;
pub const PASSES_MAX: u32 = 600;
pub const TRAINERS: usize = 3;
const EXAMPLES: &str = "20000";
const LEARNING_RATE: f32 = 0.05;
const BATCH_SIZE: usize = 32;

/// The training checker's inputs and verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainingResult {
    /// The job (empty: the only job of a one-job run).
    #[serde(default)]
    pub job: String,
    pub accuracy: f64,
    pub baseline_accuracy: f64,
    /// The accuracy may fall at most this far below the baseline.
    pub bound: f64,
    /// Whether any trainer wrote the model (none did when the job never finished; the
    /// accuracy is then 0).
    #[serde(default = "written")]
    pub model_written: bool,
}

fn written() -> bool {
    true
}

impl TrainingResult {
    pub fn within_bound(&self) -> bool {
        self.accuracy >= self.baseline_accuracy - self.bound
    }
}

/// Where the job's data is.
pub struct TrainingData {
    pub train: String,
    pub eval: String,
    pub passes: u32,
}

/// The jobs of a run of `count` jobs: none named (the group's only job, as before named jobs)
/// for one, `train-1`, `train-2`, ... for several.
pub fn job_names(count: usize) -> Vec<Option<String>> {
    match count {
        0 | 1 => vec![None],
        _ => (1..=count).map(|job| Some(format!("train-{job}"))).collect(),
    }
}

/// The directory of a job's data, trainers' models and pservers' checkpoints.
pub fn job_dir(dir: &Path, job: Option<&str>) -> PathBuf {
    job.map_or_else(|| dir.to_path_buf(), |job| dir.join(job))
}

/// `recordio synth` blobs with a held-out set under `<dir>/data`, from the embedded seed moved
/// by `seed_offset` (each job of a run has its own data).
pub fn write_dataset(
    binary: &Path,
    dir: &Path,
    passes: u32,
    seed_offset: u64,
) -> anyhow::Result<TrainingData> {
    let data = dir.join("data");
    let seed = (7 + seed_offset).to_string();
    let status = Command::new(binary)
        .args(["recordio", "synth", "--kind", "blobs", "--examples", EXAMPLES, "--features"])
        .arg(FEATURES.to_string())
        .args(["--classes", &CLASSES.to_string(), "--noise", "2.5", "--seed", &seed, "--out"])
        .arg(&data)
        .stdout(std::process::Stdio::null())
        .status()
        .context("run raftrain recordio synth")?;
    anyhow::ensure!(status.success(), "raftrain recordio synth failed ({status})");
    let path = |name: &str| data.join(name).display().to_string();
    Ok(TrainingData { train: path("train.recordio"), eval: path("eval.recordio"), passes })
}

/// Passes for a schedule that ends at `end_ms`.
pub fn passes_for(end_ms: u64) -> u32 {
    u32::try_from(end_ms / 1_000).unwrap_or(PASSES_MAX).clamp(PASSES_MIN, PASSES_MAX)
}

/// The arguments of trainer `index` of `job` (`None`: the group's only job).
pub fn trainer_args(
    (index, job): (usize, Option<&str>),
    masters: &[String],
    data: &TrainingData,
    dir: &Path,
) -> Vec<String> {
    let model_out = model_path(dir, index).display().to_string();
    let job_args = job.map(|job| ["--job".to_string(), job.to_string()]);
    let args: Vec<String> = [
        "trainer",
        "--masters",
        &masters.join(","),
        "--dataset",
        &data.train,
        "--eval-dataset",
        &data.eval,
        "--model",
        "softmax",
        "--classes",
        &CLASSES.to_string(),
        "--passes",
        &data.passes.to_string(),
        "--batch-size",
        &BATCH_SIZE.to_string(),
        "--learning-rate",
        &LEARNING_RATE.to_string(),
        "--model-out",
        &model_out,
        "--worker-threads",
        "1",
    ]
    .iter()
    .map(|arg| arg.to_string())
    .collect();
    args.into_iter().chain(job_args.into_iter().flatten()).collect()
}

pub fn model_path(dir: &Path, index: usize) -> PathBuf {
    dir.join(format!("model-{index}.safetensors"))
}

/// The accuracy of a saved model, by `raftrain eval --json`.
pub fn evaluate(binary: &Path, model: &Path, eval: &str) -> anyhow::Result<f64> {
    let output = Command::new(binary)
        .args(["eval", "--json", "--model"])
        .arg(model)
        .args(["--dataset", eval])
        .output()
        .context("run raftrain eval")?;
    anyhow::ensure!(
        output.status.success(),
        "raftrain eval failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("read raftrain eval's JSON")?;
    report["accuracy"].as_f64().context("raftrain eval printed no accuracy")
}

/// The same model trained by one process on the same data (no cluster, no faults).
pub fn baseline_accuracy(data: &TrainingData) -> anyhow::Result<f64> {
    let config = trainer::model::ModelConfig {
        kind: "softmax".parse().map_err(anyhow::Error::msg)?,
        features: FEATURES as usize,
        classes: CLASSES as usize,
        hidden: 64,
    };
    let optimizer = optimizer::OptimizerConfig {
        learning_rate: LEARNING_RATE,
        kind: optimizer::OptimizerKind::Sgd,
    };
    let batches =
        trainer::local::load_batches(&config, std::slice::from_ref(&data.train), BATCH_SIZE)?;
    let run = trainer::local::train_locally(&config, &optimizer, &batches, data.passes, 1)?;
    let evaluation = trainer::evaluation::evaluate_dataset(
        &config,
        &run.params,
        std::slice::from_ref(&data.eval),
    )?;
    evaluation.accuracy().context("a softmax model has an accuracy")
}

/// Waits until `done` says every trainer has finished, or `limit` passes.
pub async fn wait_until(
    limit: Duration,
    mut done: impl FnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while !done()? {
        anyhow::ensure!(
            Instant::now() < deadline,
            "the training job did not finish within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::CheckOptions;
    use crate::nemesis::Schedule;

    /// A model within the bound of the single-process run passes; one further below is a
    /// violation in the report.
    #[test]
    fn accuracy_below_the_bound_is_a_violation() {
        let schedule = Schedule::smoke(1);
        let report = |accuracy| {
            let result = TrainingResult {
                job: String::new(),
                accuracy,
                baseline_accuracy: 0.97,
                bound: 0.02,
                model_written: true,
            };
            crate::checker::check_all(&[], &schedule, &CheckOptions::default())
                .with_training(result)
        };
        assert!(report(0.955).valid());
        let below = report(0.94);
        assert_eq!(below.violations.len(), 1, "{:?}", below.violations);
        assert_eq!(below.violations[0].checker, "training");
    }

    /// A schedule's length sets the passes, within bounds.
    #[test]
    fn passes_follow_the_schedule() {
        assert_eq!(passes_for(0), PASSES_MIN);
        assert_eq!(passes_for(120_000), 120);
        assert_eq!(passes_for(u64::MAX), PASSES_MAX);
    }
}
