//! Planted bugs never reach a `raftrain` built any way: not even this one, built by `cargo test
//! --workspace` along with the simulation and the fault harness, whose features cargo unifies
//! with the binary's. (Issue 22: the simulation once turned the master's `planted-bugs` on for
//! every build of the workspace.)

/// The binary this test run built carries none of the planted code: not the marker in the
/// assertion every planted bug's check reaches (`platform::planted::switched_on`), so neither the
/// bugs nor the reading of `RAFTRAIN_PLANTED_BUG`. A build with the planted bugs does carry it:
/// `simulation/tests/it/planted_bugs.rs` finds it in the simulation runner built with them.
#[test]
fn the_raftrain_binary_carries_no_planted_code() -> anyhow::Result<()> {
    let path = env!("CARGO_BIN_EXE_raftrain");
    let binary = std::fs::read(path)?;
    let marker = platform::planted::COMPILED_IN_MARKER.as_bytes();
    let carried = binary.windows(marker.len()).any(|window| window == marker);
    assert!(!carried, "{path} carries the planted bugs");
    Ok(())
}
