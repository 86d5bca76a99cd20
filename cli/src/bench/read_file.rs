//! `bench read-file` (hidden; `bench pserver` starts it): reads one file in a fresh process,
//! as a checkpoint restore (`read_checkpoint`, checked whole) or raw (one `read`), and prints
//! the seconds it took. A fresh process is what a replacement pserver is: its memory comes
//! from the kernel, where a long-running benchmark would reuse what it freed before.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::Context as _;
use clap::{Args, ValueEnum};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum ReadAs {
    /// `read_checkpoint`: the frame, the body parsed into blocks and its crc checked.
    Checkpoint,
    /// `std::fs::read`: the bytes, nothing checked.
    Raw,
}

#[derive(Debug, Args)]
pub(crate) struct ReadFileArgs {
    /// The file to read.
    #[arg(long)]
    path: PathBuf,
    /// How to read it.
    #[arg(long = "as", value_enum)]
    read_as: ReadAs,
}

pub(crate) fn run(args: &ReadFileArgs) -> anyhow::Result<()> {
    println!("{}", read(&args.path, args.read_as)?);
    Ok(())
}

/// Seconds to read `path` as `read_as`, in this process.
fn read(path: &Path, read_as: ReadAs) -> anyhow::Result<f64> {
    let started = Instant::now();
    match read_as {
        ReadAs::Checkpoint => {
            let checkpoint = storage::checkpoint::read_checkpoint(path)?;
            anyhow::ensure!(!checkpoint.blocks.is_empty(), "{}: no blocks", path.display());
        }
        ReadAs::Raw => {
            let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
            anyhow::ensure!(!bytes.is_empty(), "{}: empty", path.display());
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Seconds a fresh `raftrain bench read-file` process took to read `path` as `read_as`.
pub(crate) fn read_in_child(path: &Path, read_as: ReadAs) -> anyhow::Result<f64> {
    let program = std::env::current_exe().context("find this program")?;
    let kind = match read_as {
        ReadAs::Checkpoint => "checkpoint",
        ReadAs::Raw => "raw",
    };
    let output = Command::new(program)
        .args(["bench", "read-file", "--as", kind, "--path"])
        .arg(path)
        .output()
        .context("start `raftrain bench read-file`")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success(),
        "reading {} failed: {}",
        path.display(),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    stdout.trim().parse().with_context(|| format!("the reader printed {stdout:?}"))
}
