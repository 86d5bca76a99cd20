//! A job's spec as `raftrain job submit` takes it: from flags, or from a TOML file with the
//! same fields (kebab-case, as the flags are spelled). Unknown keys are refused with their
//! line; a spec must name its dataset one way (RecordIO files or an index range).

use std::path::Path;

use anyhow::Context;
use clap::Args;
use client::{JobDataset, JobSpec, PolicyOverrides};
use serde::Deserialize;

/// The spec's fields, as flags (or, with `--spec`, as the keys of a TOML file).
#[derive(Debug, Clone, Default, Args, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) struct SpecFields {
    /// The job's name: trainers and pservers join it with `--job NAME`.
    #[arg(long)]
    pub name: Option<String>,
    /// RecordIO files or globs as the masters see them, comma-separated.
    #[arg(long, value_delimiter = ',', conflicts_with = "index")]
    #[serde(default)]
    pub dataset: Vec<String>,
    /// An index-range dataset instead: the indices [0, SIZE), read by the trainers themselves.
    #[arg(long, value_name = "SIZE", requires = "shard_size")]
    pub index: Option<u64>,
    /// Indices per task of an index-range dataset.
    #[arg(long, value_name = "N")]
    pub shard_size: Option<u64>,
    /// Passes over the dataset.
    #[arg(long)]
    pub passes: Option<u32>,
    /// Chunks per task (RecordIO); default: the masters' --chunks-per-task.
    #[arg(long)]
    pub chunks_per_task: Option<u32>,
    /// No task times out sooner than this; default: the masters' flag.
    #[arg(long)]
    pub task_timeout_min_ms: Option<u64>,
    /// k in deadline = max(min, k x average task time); default: the masters' flag.
    #[arg(long)]
    pub timeout_factor: Option<u32>,
    /// A task failing or timing out more often than this in a pass moves to failed.
    #[arg(long)]
    pub max_task_failures: Option<u32>,
    /// Give failed tasks another try in the next pass.
    #[arg(long)]
    pub retry_failed_next_pass: Option<bool>,
    /// Hand each pass's tasks out in a seeded permutation (another one each pass, replicated:
    /// a failover or a restore replays it), and have consumers read each task's samples in a
    /// seeded order. Part of the job: a later submit with another seed is refused.
    #[arg(long)]
    #[serde(default)]
    pub shuffle: bool,
    /// The shuffle's seed (with --shuffle; default 0): the same seed, the same orders.
    #[arg(long, value_name = "N", requires = "shuffle")]
    pub seed: Option<u64>,
}

impl SpecFields {
    /// Reads a spec file; errors name the file and, from the parser, the line.
    pub(crate) fn from_file(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("read the job spec {}", path.display()))?;
        toml::from_str(&text).map_err(|error| {
            anyhow::anyhow!("job spec {}: {}", path.display(), error.to_string().trim_end())
        })
    }

    /// The spec, once every required field is there; the error names what is missing.
    pub(crate) fn to_spec(&self) -> anyhow::Result<JobSpec> {
        let name = self.name.clone().filter(|name| !name.is_empty());
        let name = name.context("name: give the job a name (--name, or `name` in the spec)")?;
        let passes = self.passes.context("passes: say how many passes (--passes)")?;
        let dataset = match (&self.dataset[..], self.index, self.shard_size) {
            ([], Some(size), Some(shard_size)) => JobDataset::Index { size, shard_size },
            ([], Some(_), None) => anyhow::bail!("shard-size: an index dataset needs one"),
            ([], None, _) => anyhow::bail!(
                "dataset: give RecordIO files (--dataset) or an index range (--index and --shard-size)"
            ),
            (patterns, None, None) => JobDataset::RecordIo { patterns: patterns.to_vec() },
            (_, _, _) => anyhow::bail!("dataset: give RecordIO files or an index range, not both"),
        };
        let policy = PolicyOverrides {
            chunks_per_task: self.chunks_per_task,
            task_timeout_min_ms: self.task_timeout_min_ms,
            timeout_factor: self.timeout_factor,
            max_task_failures: self.max_task_failures,
            retry_failed_next_pass: self.retry_failed_next_pass,
        };
        let shuffle_seed = match (self.shuffle, self.seed) {
            (true, seed) => Some(seed.unwrap_or(0)),
            (false, None) => None,
            (false, Some(_)) => anyhow::bail!("seed: give it with --shuffle (`shuffle = true`)"),
        };
        let spec = JobSpec { job: name, dataset, passes, policy, restart: false, shuffle_seed };
        spec.check().map_err(anyhow::Error::msg)?;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<JobSpec> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("job.toml");
        std::fs::write(&path, text)?;
        SpecFields::from_file(&path)?.to_spec()
    }

    #[test]
    fn a_spec_file_reads_as_the_flags_do() {
        let spec = parse(
            "name = \"mnist\"\npasses = 3\ndataset = [\"/d/*.recordio\"]\nmax-task-failures = 2\n",
        )
        .expect("a valid spec");
        assert_eq!(spec.job, "mnist");
        assert_eq!(spec.dataset, JobDataset::RecordIo { patterns: vec!["/d/*.recordio".into()] });
        assert_eq!((spec.passes, spec.policy.max_task_failures), (3, Some(2)));
        let index =
            parse("name = \"i\"\npasses = 1\nindex = 100\nshard-size = 10\n").expect("index");
        assert_eq!(index.dataset, JobDataset::Index { size: 100, shard_size: 10 });
    }

    #[test]
    fn unknown_keys_and_missing_fields_are_named() {
        let shuffled = parse(
            "name = \"s\"\npasses = 2\nindex = 9\nshard-size = 3\nshuffle = true\nseed = 7\n",
        );
        assert_eq!(shuffled.expect("shuffled").shuffle_seed, Some(7));
        let unseeded =
            parse("name = \"s\"\npasses = 2\nindex = 9\nshard-size = 3\nshuffle = true\n");
        assert_eq!(unseeded.expect("shuffled").shuffle_seed, Some(0), "seed 0 by default");
        let plain = parse("name = \"s\"\npasses = 2\nindex = 9\nshard-size = 3\n");
        assert_eq!(plain.expect("plain").shuffle_seed, None);
        assert!(parse("name = \"s\"\npasses = 2\nindex = 9\nshard-size = 3\nseed = 7\n").is_err());
        let unknown = parse("name = \"x\"\npasses = 1\n\nshard_sise = 3\n").expect_err("unknown");
        let text = format!("{unknown:#}");
        assert!(text.contains("line 4") && text.contains("shard_sise"), "{text}");
        assert!(text.contains("job.toml"), "{text}");
        let missing = parse("name = \"x\"\npasses = 1\n").expect_err("no dataset");
        assert!(format!("{missing:#}").contains("dataset"), "{missing:#}");
        let both =
            parse("name = \"x\"\npasses = 1\ndataset = [\"a\"]\nindex = 5\nshard-size = 1\n");
        assert!(format!("{:#}", both.expect_err("both")).contains("not both"));
    }
}
