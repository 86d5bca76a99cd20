//! `raftrain recordio synth`: a synthetic dataset with a known answer, deterministic by seed on
//! every machine (its own splitmix64 and Box-Muller, no library whose stream may change):
//! Gaussian blobs for classification, known weights plus noise for regression. Writes
//! `train.recordio`, `eval.recordio` and `truth.json` (the centers, or the weights and bias)
//! into `--out`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use proto::example::Example;
use proto::Message as _;
use serde_json::json;
use storage::recordio::{Compressor, Writer, WriterOptions};

use super::output_file::OutputFile;

/// Limits that keep a synthetic dataset within what a job admits and a disk holds.
const EXAMPLES_MAX: u64 = 100_000_000;
const FEATURES_MAX: u32 = 100_000;
const CLASSES_MAX: u32 = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SynthKind {
    /// One Gaussian blob per class (label = class id).
    Blobs,
    /// y = w . x + b + noise (label = y).
    Linear,
}

#[derive(Debug, Args)]
pub(crate) struct SynthArgs {
    #[arg(long, value_enum, default_value = "blobs")]
    kind: SynthKind,
    /// Training examples.
    #[arg(long, default_value_t = 10_000)]
    examples: u64,
    /// Evaluation examples (default: a quarter of --examples).
    #[arg(long)]
    eval_examples: Option<u64>,
    #[arg(long, default_value_t = 10)]
    features: u32,
    /// Classes (blobs only).
    #[arg(long, default_value_t = 3)]
    classes: u32,
    /// Standard deviation of each blob around its center, or of the regression noise.
    #[arg(long, default_value_t = 1.0)]
    noise: f32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Chunk size: small chunks make many tasks, so a small dataset still spreads over trainers.
    #[arg(long, default_value_t = 16 << 10)]
    max_chunk_bytes: usize,
    /// Output directory (created).
    #[arg(long)]
    out: PathBuf,
}

pub(crate) fn run(args: &SynthArgs) -> anyhow::Result<()> {
    validate(args)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("create --out {}", args.out.display()))?;
    let mut truth_rng = SplitMix::new(args.seed);
    let truth = Truth::draw(args, &mut truth_rng);
    let eval_examples = args.eval_examples.unwrap_or(args.examples / 4).max(1);
    write(
        args,
        &truth,
        &args.out.join("train.recordio"),
        args.examples,
        args.seed ^ 0x0074_7261_696e,
    )?;
    write(args, &truth, &args.out.join("eval.recordio"), eval_examples, args.seed ^ 0x6576_616c)?;
    let truth_path = args.out.join("truth.json");
    std::fs::write(&truth_path, serde_json::to_string_pretty(&truth.to_json(args))?)
        .with_context(|| format!("write {}", truth_path.display()))?;
    println!(
        "wrote {} training and {eval_examples} evaluation examples to {}",
        args.examples,
        args.out.display()
    );
    Ok(())
}

fn validate(args: &SynthArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (1..=EXAMPLES_MAX).contains(&args.examples),
        "--examples {} is outside 1..={EXAMPLES_MAX}",
        args.examples
    );
    anyhow::ensure!(
        (1..=FEATURES_MAX).contains(&args.features),
        "--features {} is outside 1..={FEATURES_MAX}",
        args.features
    );
    anyhow::ensure!(
        (2..=CLASSES_MAX).contains(&args.classes),
        "--classes {} is outside 2..={CLASSES_MAX}",
        args.classes
    );
    anyhow::ensure!(
        args.noise.is_finite() && args.noise >= 0.0,
        "--noise {} must be finite and at least 0",
        args.noise
    );
    anyhow::ensure!(args.max_chunk_bytes > 0, "--max-chunk-bytes must be at least 1");
    if let Some(eval) = args.eval_examples {
        anyhow::ensure!(
            (1..=EXAMPLES_MAX).contains(&eval),
            "--eval-examples {eval} is outside 1..={EXAMPLES_MAX}"
        );
    }
    Ok(())
}

/// The known answer: blob centers, or regression weights and bias.
enum Truth {
    Centers(Vec<Vec<f32>>),
    Weights { weights: Vec<f32>, bias: f32 },
}

impl Truth {
    fn draw(args: &SynthArgs, rng: &mut SplitMix) -> Self {
        let features = args.features as usize;
        match args.kind {
            // Centers spread over [-4, 4]: with unit noise the classes overlap a little.
            SynthKind::Blobs => Self::Centers(
                (0..args.classes)
                    .map(|_| (0..features).map(|_| rng.uniform(-4.0, 4.0)).collect())
                    .collect(),
            ),
            SynthKind::Linear => Self::Weights {
                weights: (0..features).map(|_| rng.uniform(-1.0, 1.0)).collect(),
                bias: rng.uniform(-1.0, 1.0),
            },
        }
    }

    fn example(&self, noise: f32, index: u64, rng: &mut SplitMix) -> Example {
        match self {
            Self::Centers(centers) => {
                let class = (index % centers.len() as u64) as usize;
                let dense =
                    centers[class].iter().map(|center| center + noise * rng.normal()).collect();
                Example { dense, label: class as f32, ..Example::default() }
            }
            Self::Weights { weights, bias } => {
                let dense: Vec<f32> = weights.iter().map(|_| rng.normal()).collect();
                let label = weights.iter().zip(&dense).map(|(w, x)| w * x).sum::<f32>()
                    + bias
                    + noise * rng.normal();
                Example { dense, label, ..Example::default() }
            }
        }
    }

    fn to_json(&self, args: &SynthArgs) -> serde_json::Value {
        match self {
            Self::Centers(centers) => {
                json!({"kind": "blobs", "seed": args.seed, "features": args.features, "classes": args.classes, "noise": args.noise, "centers": centers})
            }
            Self::Weights { weights, bias } => {
                json!({"kind": "linear", "seed": args.seed, "features": args.features, "noise": args.noise, "weights": weights, "bias": bias})
            }
        }
    }
}

fn write(
    args: &SynthArgs,
    truth: &Truth,
    path: &Path,
    examples: u64,
    seed: u64,
) -> anyhow::Result<()> {
    let mut output = OutputFile::create(path)?;
    let options =
        WriterOptions { compressor: Compressor::Snappy, max_chunk_bytes: args.max_chunk_bytes };
    let mut writer = Writer::new(output.writer(), options);
    let mut rng = SplitMix::new(seed);
    for index in 0..examples {
        let example = truth.example(args.noise, index, &mut rng);
        writer.write_record(&example.encode_to_vec()).context("write a record")?;
    }
    writer.finish().with_context(|| format!("finish {}", path.display()))?;
    output.commit()
}

/// splitmix64: a fixed stream for a fixed seed, on every machine and every build.
struct SplitMix {
    state: u64,
}

impl SplitMix {
    fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut value = self.state;
        value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        value ^ (value >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1_u64 << 53) as f64
    }

    fn uniform(&mut self, low: f32, high: f32) -> f32 {
        low + (high - low) * self.unit() as f32
    }

    /// A standard normal by Box-Muller (one of the pair; simple over fast).
    fn normal(&mut self) -> f32 {
        let radius = (-2.0 * (1.0 - self.unit()).ln()).sqrt();
        (radius * (2.0 * std::f64::consts::PI * self.unit()).cos()) as f32
    }
}
