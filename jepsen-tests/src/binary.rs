//! Where the `raftrain` binary under test is: `RAFTRAIN_BIN`, or the workspace's own build
//! (built first if needed, so `cargo test -p jepsen-tests` alone tests the current code).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

/// The environment variable naming the binary to test.
pub const BINARY_ENV: &str = "RAFTRAIN_BIN";

/// `RAFTRAIN_BIN` if set; otherwise `cargo build -p cli --bin raftrain` in this workspace
/// (with `--release` when `release`) and the path cargo built.
pub fn raftrain_binary(release: bool) -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os(BINARY_ENV) {
        let path = PathBuf::from(path);
        anyhow::ensure!(path.is_file(), "{BINARY_ENV}={} is not a file", path.display());
        return Ok(path);
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().context("workspace root")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.current_dir(workspace).args(["build", "--quiet", "-p", "cli", "--bin", "raftrain"]);
    if release {
        build.arg("--release");
    }
    let status = build.status().context("run cargo build for the raftrain binary")?;
    anyhow::ensure!(status.success(), "cargo build -p cli failed ({status})");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let path = target.join(if release { "release" } else { "debug" }).join("raftrain");
    anyhow::ensure!(path.is_file(), "cargo built no {}", path.display());
    Ok(path)
}
