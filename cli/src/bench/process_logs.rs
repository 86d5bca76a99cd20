//! Where a benchmark's child processes log: one file per process under a directory that
//! outlives the run (`--log-dir`, or a new one under the system's temporary directory), named
//! on standard error when the benchmark starts. Standard output holds the tables alone, and the
//! logs stay apart from the data directories the benchmark deletes.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The benchmark's log directory, and how many clusters have taken a subdirectory of it.
pub(crate) struct ProcessLogs {
    dir: PathBuf,
    clusters: usize,
}

impl ProcessLogs {
    /// `chosen`, or a new `raftrain-bench-<bench>-*` directory, kept; says where on stderr.
    pub(crate) fn create(bench: &str, chosen: Option<&Path>) -> anyhow::Result<Self> {
        let dir = match chosen {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("create --log-dir {}", dir.display()))?;
                dir.to_path_buf()
            }
            None => tempfile::Builder::new()
                .prefix(&format!("raftrain-bench-{bench}-"))
                .tempdir()
                .context("create a directory for the processes' logs")?
                .keep(),
        };
        eprintln!("bench {bench}: the processes' logs are in {}", dir.display());
        Ok(Self { dir, clusters: 0 })
    }

    /// A new directory for the next cluster's logs: `<dir>/<count>-<label>`.
    pub(crate) fn cluster(&mut self, label: &str) -> anyhow::Result<PathBuf> {
        self.clusters += 1;
        let dir = self.dir.join(format!("{:02}-{label}", self.clusters));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        Ok(dir)
    }
}
