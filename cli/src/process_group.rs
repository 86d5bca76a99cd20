//! The process supervisor (`supervisor`, shared with the fault harness) and the
//! measuring helpers the benchmarks use with it.

use anyhow::Context as _;
use std::path::Path;
use std::process::{Command, Stdio};

pub(crate) use supervisor::{exit_with_parent, free_loopback_addrs, ProcessGroup};

/// Runs this executable once with `args` (a tool step such as `recordio synth`) and waits for
/// it; its standard output is discarded, its errors name the step.
pub(crate) fn run_raftrain(args: &[String]) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("find the raftrain executable")?;
    let status = Command::new(exe)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("run raftrain {}", args.join(" ")))?;
    anyhow::ensure!(status.success(), "raftrain {} failed ({status})", args.join(" "));
    Ok(())
}

/// The resident memory of a process, from `/proc/<pid>/status`.
pub(crate) fn resident_bytes(pid: u32) -> anyhow::Result<u64> {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).context("read /proc status")?;
    let line = status.lines().find(|line| line.starts_with("VmRSS:")).context("no VmRSS line")?;
    let kib: u64 = line.split_whitespace().nth(1).context("no VmRSS value")?.parse()?;
    Ok(kib * 1024)
}

/// The bytes of every file below `path`.
pub(crate) fn directory_bytes(path: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(path).with_context(|| format!("list {}", path.display()))? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        total += if metadata.is_dir() { directory_bytes(&entry.path())? } else { metadata.len() };
    }
    Ok(total)
}

/// The `quantile` of sorted durations, in milliseconds (nearest rank).
pub(crate) fn percentile_ms(sorted: &[std::time::Duration], quantile: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * quantile).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}
