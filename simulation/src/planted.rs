//! Switching the production code's planted bugs (`consensus::planted`, `master::planted`,
//! `pserver::planted`) on for a run's thread. They are compiled in only with this crate's `planted-bugs` feature,
//! which no default build enables (so no whole-workspace build carries them into `raftrain`);
//! without it, a run that names one is refused, never run clean in silence.

/// How to get a simulation that can plant the production code's bugs.
pub const FEATURE_NEEDED: &str = "the production code's planted bugs are compiled in only \
    with the simulation's `planted-bugs` feature: cargo run -p simulation --release \
    --features planted-bugs -- ... (its tests: cargo test -p simulation --features planted-bugs \
    --profile planted planted_bugs)";

/// Refuses `production` bugs this build cannot plant: any, without the `planted-bugs` feature.
pub fn check_available(production: &[&str]) -> anyhow::Result<()> {
    if cfg!(feature = "planted-bugs") || production.is_empty() {
        return Ok(());
    }
    anyhow::bail!("cannot plant {}: {FEATURE_NEEDED}", production.join(", "))
}

/// Switches exactly `production` on for code running on this thread (none: all off).
#[cfg(feature = "planted-bugs")]
pub(crate) fn plant_on_this_thread(production: &[&str]) -> anyhow::Result<()> {
    let known: Vec<&str> =
        [consensus::planted::BUG_NAMES, master::planted::BUG_NAMES, pserver::planted::BUG_NAMES]
            .concat();
    platform::planted::plant_on_this_thread(production, &known);
    Ok(())
}

/// Switches exactly `production` on for code running on this thread: only none, in a build
/// without the planted bugs.
#[cfg(not(feature = "planted-bugs"))]
pub(crate) fn plant_on_this_thread(production: &[&str]) -> anyhow::Result<()> {
    check_available(production)
}
