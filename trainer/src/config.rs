//! `TrainerConfig`: the flags of `raftrain trainer`. Doc comments are the `--help` text;
//! defaults are named constants; `validate` checks the rules between fields.

use platform::security::SecurityFiles;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use client::pserver::layout::{BLOCK_ELEMENTS_DEFAULT, BLOCK_ELEMENTS_MAX};
use optimizer::{OptimizerConfig, OptimizerKind};

use crate::model::{ModelConfig, ModelKind};

pub const BATCH_SIZE_DEFAULT: usize = 64;
pub const BATCH_SIZE_MAX: usize = 1 << 20;
/// A batch is computed while the previous one's push and pull are in flight.
pub const STALENESS_DEFAULT: u32 = 1;
/// More would need a queue of exchanges; one in flight already hides a round trip behind a
/// batch that takes as long.
pub const STALENESS_MAX: u32 = 1;
/// Consecutive tasks this trainer may fail to read (its own fault, not the data's) before it
/// gives up: a trainer whose view of the data stays broken exits rather than churn the queue.
pub const LOCAL_FAILURES_MAX_DEFAULT: u32 = 10;
/// The passes of a job this trainer submits itself (`--dataset` and no job of that name) when
/// `--passes` is not given; a trainer joining a submitted job takes that job's.
pub const PASSES_DEFAULT: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OptimizerName {
    Sgd,
    Momentum,
    Adam,
    Adagrad,
}

#[derive(Debug, Clone, Args)]
pub struct TrainerConfig {
    /// Master addresses (any subset of the group), comma-separated.
    #[arg(long, env = "RAFTRAIN_MASTERS", value_delimiter = ',', required = true)]
    pub masters: Vec<String>,
    /// The training data: RecordIO files or globs as the masters and trainers see them,
    /// comma-separated. Absent: the trainer takes the dataset of the job `--job` names, and
    /// waits until that job is submitted. Given: a job of that name must read these files;
    /// when none exists yet, this trainer submits it (with `--passes`).
    #[arg(long, env = "RAFTRAIN_DATASET", value_delimiter = ',')]
    pub dataset: Option<Vec<String>>,
    /// The model: linear, logistic, softmax or mlp.
    #[arg(long, env = "RAFTRAIN_MODEL", value_parser = clap::value_parser!(ModelKind))]
    pub model: ModelKind,
    /// Input features (default: the dense length of the dataset's first record).
    #[arg(long, env = "RAFTRAIN_FEATURES")]
    pub features: Option<usize>,
    /// Classes (softmax and mlp).
    #[arg(long, env = "RAFTRAIN_CLASSES", default_value_t = 2)]
    pub classes: usize,
    /// Hidden units (mlp).
    #[arg(long, env = "RAFTRAIN_HIDDEN", default_value_t = 64)]
    pub hidden: usize,
    #[arg(long, env = "RAFTRAIN_BATCH_SIZE", default_value_t = BATCH_SIZE_DEFAULT)]
    pub batch_size: usize,
    /// Push the gradient (averaged over the batches since the last push) every n batches.
    #[arg(long, env = "RAFTRAIN_PUSH_EVERY", default_value_t = 1)]
    pub push_every: usize,
    /// Pull fresh parameters every m batches.
    #[arg(long, env = "RAFTRAIN_PULL_EVERY", default_value_t = 1)]
    pub pull_every: usize,
    /// Pushes this trainer may have in flight while it computes: 1 (the default) sends a
    /// batch's gradient, then pulls, while the next batch computes, so that batch's parameters
    /// lack this trainer's latest push (a staleness of one step); 0 waits for each push and
    /// pull before the next batch.
    #[arg(long, env = "RAFTRAIN_STALENESS", default_value_t = STALENESS_DEFAULT)]
    pub staleness: u32,
    /// Passes over the dataset. Absent: the submitted job's, or 1 when this trainer submits the
    /// job with `--dataset`. Given: a submitted job must have as many.
    #[arg(long, env = "RAFTRAIN_PASSES")]
    pub passes: Option<u32>,
    #[arg(long, env = "RAFTRAIN_OPTIMIZER", value_enum, default_value = "sgd")]
    pub optimizer: OptimizerName,
    #[arg(long, env = "RAFTRAIN_LEARNING_RATE", default_value_t = 0.1)]
    pub learning_rate: f32,
    /// Evaluate on these files after each pass (recorded in the master, shown by status).
    #[arg(long, env = "RAFTRAIN_EVAL_DATASET", value_delimiter = ',')]
    pub eval_dataset: Vec<String>,
    /// Write the final model here (safetensors) when the job finishes.
    #[arg(long, env = "RAFTRAIN_MODEL_OUT")]
    pub model_out: Option<PathBuf>,
    /// The job's name in the master.
    #[arg(long, env = "RAFTRAIN_JOB", default_value = "job")]
    pub job: String,
    /// Seed of the initial parameters (the same on every trainer, so whichever initializes,
    /// the model starts the same).
    #[arg(long, env = "RAFTRAIN_SEED", default_value_t = 1)]
    pub seed: u64,
    /// Parameter block size on the pservers.
    #[arg(long, env = "RAFTRAIN_BLOCK_ELEMENTS", default_value_t = BLOCK_ELEMENTS_DEFAULT)]
    pub block_elements: u32,
    /// Give up when no master leader answers a call for this long (seconds). Absent or 0: no
    /// limit; the trainer waits out a master outage of any length, says so in its log every
    /// few seconds and answers 503 on /readyz meanwhile.
    #[arg(long, env = "RAFTRAIN_MASTER_WAIT_S")]
    pub master_wait_s: Option<u64>,
    /// Give up when not every pserver slot is held, or a slot goes unserved, for this long
    /// (seconds). Absent or 0: no limit (a replacement pserver may take minutes to schedule);
    /// /readyz answers 503 while the trainer waits.
    #[arg(long, env = "RAFTRAIN_PSERVER_WAIT_S")]
    pub pserver_wait_s: Option<u64>,
    /// Consecutive tasks this trainer may fail to read (I/O errors, a file shorter than the
    /// master recorded: its own view of the data, not the data) or to fit into its model
    /// (a label at or above --classes, another feature count) before it exits non-zero; from
    /// the third it backs off between tasks. A task read or trained resets the count.
    #[arg(long, env = "RAFTRAIN_LOCAL_FAILURES_MAX", default_value_t = LOCAL_FAILURES_MAX_DEFAULT)]
    pub local_failures_max: u32,
    /// This trainer's name in the master (default: host and process id).
    #[arg(long, env = "RAFTRAIN_NAME")]
    pub name: Option<String>,
    /// Serve Prometheus metrics on `GET /metrics` at this address (host:port).
    #[arg(long, env = "RAFTRAIN_METRICS_LISTEN")]
    pub metrics_listen: Option<SocketAddr>,
    #[command(flatten)]
    pub security: SecurityFiles,
    #[command(flatten)]
    pub port_limits: platform::PortLimits,
}

impl TrainerConfig {
    pub fn validate(&self) -> anyhow::Result<()> {
        self.port_limits.validate(0)?;
        // A name no submit admits would be waited for for ever.
        client::check_job_name(&self.job).map_err(|error| anyhow::anyhow!("--job: {error}"))?;
        let empty_dataset = self.dataset.as_ref().is_some_and(|patterns| patterns.is_empty());
        anyhow::ensure!(!empty_dataset, "--dataset is empty");
        anyhow::ensure!(
            (1..=BATCH_SIZE_MAX).contains(&self.batch_size),
            "--batch-size {} is outside 1..={BATCH_SIZE_MAX}",
            self.batch_size
        );
        anyhow::ensure!(
            self.push_every >= 1 && self.pull_every >= 1,
            "--push-every and --pull-every must be at least 1"
        );
        anyhow::ensure!(
            self.staleness <= STALENESS_MAX,
            "--staleness {} is over {STALENESS_MAX}",
            self.staleness
        );
        if let Some(passes) = self.passes {
            anyhow::ensure!(passes >= 1, "--passes must be at least 1");
        }
        anyhow::ensure!(self.local_failures_max >= 1, "--local-failures-max must be at least 1");
        anyhow::ensure!(
            (1..=BLOCK_ELEMENTS_MAX).contains(&self.block_elements),
            "--block-elements {} is outside 1..={BLOCK_ELEMENTS_MAX}",
            self.block_elements
        );
        self.optimizer()
            .validate()
            .map_err(|error| anyhow::anyhow!("--optimizer/--learning-rate: {error}"))?;
        Ok(())
    }

    /// The deadline of one call to the masters: `None` waits for a leader without limit.
    pub fn master_wait(&self) -> Option<Duration> {
        opt_in_limit(self.master_wait_s)
    }

    /// How long a pserver slot may go unheld or unserved: `None` waits without limit.
    pub fn pserver_wait(&self) -> Option<Duration> {
        opt_in_limit(self.pserver_wait_s)
    }

    pub fn model_config(&self, features: usize) -> anyhow::Result<ModelConfig> {
        let config =
            ModelConfig { kind: self.model, features, classes: self.classes, hidden: self.hidden };
        config.validate()?;
        Ok(config)
    }

    pub fn optimizer(&self) -> OptimizerConfig {
        let kind = match self.optimizer {
            OptimizerName::Sgd => OptimizerKind::Sgd,
            OptimizerName::Momentum => OptimizerKind::MOMENTUM_DEFAULT,
            OptimizerName::Adam => OptimizerKind::ADAM_DEFAULT,
            OptimizerName::Adagrad => OptimizerKind::ADAGRAD_DEFAULT,
        };
        OptimizerConfig { learning_rate: self.learning_rate, kind }
    }
}

/// An opt-in limit in seconds: absent or 0 means none.
fn opt_in_limit(seconds: Option<u64>) -> Option<Duration> {
    seconds.filter(|seconds| *seconds > 0).map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        config: TrainerConfig,
    }

    fn parse(extra: &[&str]) -> TrainerConfig {
        let required = ["trainer", "--masters", "m:1", "--dataset", "d", "--model", "linear"];
        Command::try_parse_from(required.iter().chain(extra)).expect("valid flags").config
    }

    /// A trainer may name only its job: `--dataset` and `--passes` are then absent, not
    /// defaulted, so the submitted job's are taken and nothing of the trainer's contradicts
    /// them; given, they are kept as given, and an empty or zero one is refused.
    #[test]
    fn dataset_and_passes_are_optional() {
        let only_the_job = ["trainer", "--masters", "m:1", "--job", "a", "--model", "linear"];
        let config = Command::try_parse_from(only_the_job).expect("valid flags").config;
        assert_eq!((config.dataset.clone(), config.passes), (None, None));
        config.validate().expect("a trainer joining by --job alone is valid");
        let config = parse(&["--passes", "4"]);
        assert_eq!((config.dataset.clone(), config.passes), (Some(vec!["d".into()]), Some(4)));
        let error = parse(&["--passes", "0"]).validate().expect_err("0 passes");
        assert!(error.to_string().contains("--passes"), "{error}");
    }

    /// A trainer waits for the masters and for pserver slots without limit unless a limit is
    /// asked for; 0 also means no limit.
    #[test]
    fn waits_are_unlimited_unless_opted_in() {
        let cases: [(&[&str], Option<u64>, Option<u64>); 4] = [
            (&[], None, None),
            (&["--master-wait-s", "40"], Some(40), None),
            (&["--pserver-wait-s", "3"], None, Some(3)),
            (&["--master-wait-s", "0", "--pserver-wait-s", "0"], None, None),
        ];
        for (flags, master_s, pserver_s) in cases {
            let config = parse(flags);
            assert_eq!(config.master_wait(), master_s.map(Duration::from_secs), "{flags:?}");
            assert_eq!(config.pserver_wait(), pserver_s.map(Duration::from_secs), "{flags:?}");
        }
    }
}
