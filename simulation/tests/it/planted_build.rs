//! The production code's planted bugs are caught under the one full test command (`cargo test
//! --workspace`, which CI runs) although no default build compiles them in: this build runs
//! their tests (`planted_bugs.rs`) in a nested build with the simulation's `planted-bugs`
//! feature. (A build with the feature runs them directly, and not this.)
//!
//! The nested build uses the workspace's `planted` profile, whose output directory
//! (`target/planted/`) is its own: in this build's `target/debug/` it would replace the
//! simulation runner this build's tests start (`CARGO_BIN_EXE_simulation`) with one that
//! carries the planted code. (Cargo releases the outer build's lock before it runs the tests,
//! so a shared directory would not deadlock.) The price of a directory of its own is compiling
//! the simulation's dependencies once more, the first time.

use std::path::{Path, PathBuf};
use std::process::Command;

/// This build's target directory: the runner lies in `<target>/<profile>/`.
fn target_dir() -> PathBuf {
    let runner = Path::new(env!("CARGO_BIN_EXE_simulation"));
    let target = runner.ancestors().nth(2).expect("the runner lies in <target>/<profile>/");
    target.to_path_buf()
}

/// Clears the variables cargo set for this test (`CARGO_MANIFEST_DIR`, `CARGO_PKG_NAME`, ...),
/// which build scripts watch (ring's reruns on `CARGO_MANIFEST_DIR`): with them the nested
/// build and the same command typed in a shell would rebuild each other's dependencies.
fn without_this_packages_variables(command: &mut Command) {
    let package_variables = std::env::vars_os().filter_map(|(name, _)| {
        let name = name.into_string().ok()?;
        let set_by_cargo = name.starts_with("CARGO_PKG_")
            || ["CARGO_MANIFEST_DIR", "CARGO_MANIFEST_PATH", "CARGO_CRATE_NAME"].contains(&&*name);
        set_by_cargo.then_some(name)
    });
    for name in package_variables {
        command.env_remove(name);
    }
}

/// Every test of `planted_bugs.rs` passes in a build with the planted bugs: each bug is caught
/// at its seed, which passes without it. A bug that goes unnoticed fails this test with the
/// nested run's output.
#[test]
fn the_planted_bugs_are_caught_in_a_build_with_them() -> anyhow::Result<()> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
    let mut command = Command::new(env!("CARGO"));
    without_this_packages_variables(&mut command);
    command
        .current_dir(workspace)
        .args(["test", "-p", "simulation", "--features", "planted-bugs", "--profile", "planted"])
        .args(["--locked", "--offline", "--target-dir"])
        .arg(target_dir())
        .args(["--test", "it", "--", "planted_bugs::"]);
    let output = command.output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{command:?} failed:\n{stdout}\n{stderr}");
    // Each production bug's test, the simulated store's and the runner's marker test.
    let passed = stdout
        .lines()
        .filter(|line| line.starts_with("test planted_bugs::") && line.ends_with(" ok"))
        .count();
    let expected = simulation::config::PRODUCTION_BUGS.len() + 2;
    assert!(passed >= expected, "{command:?} ran {passed} of {expected} tests:\n{stdout}");
    Ok(())
}
