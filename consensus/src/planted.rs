//! Bugs planted on purpose in the replicated log, to show the fault harness (`jepsen-tests`)
//! catches them. They exist only with the `planted-bugs` feature (which the master's feature of
//! the same name turns on, and with it the simulation's and `cli`'s; no default build of any
//! workspace member does), and each is switched on by name in
//! `RAFTRAIN_PLANTED_BUG` (comma-separated), like the master's (`master/src/planted.rs`):
//!
//! - `jammed-batcher`: a proposed entry's writers wait for openraft's answer only, with no end
//!   at a leadership change or the write timeout: the first wave's bug. An entry replaced by a
//!   snapshot install is never answered, so a leader paused, overtaken and elected again holds
//!   its batcher slots for ever and commits nothing.

//!
//! The simulation runs every node on one thread and switches bugs on for that thread only
//! ([`plant_on_this_thread`]), so seeds running side by side in other threads stay clean.

/// The environment variable naming the planted bugs to switch on.
pub const PLANTED_BUG_ENV: &str = "RAFTRAIN_PLANTED_BUG";

/// Words only a build with the planted bugs carries (in [`active`]'s assertion, which every
/// planted bug's call site reaches): tests look for them in binaries to prove a default build
/// carries no planted code (`cli/tests/it/planted_bugs.rs`) and that one built with the
/// feature does (`simulation/tests/it/planted_bugs.rs`).
pub const COMPILED_IN_MARKER: &str = "raftrain built with planted bugs";

/// The log's planted bugs, by name (the master names its own: `master/src/planted.rs`).
pub const BUG_NAMES: &[&str] = &["jammed-batcher"];

#[cfg(feature = "planted-bugs")]
thread_local! {
    static THREAD_BUGS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether the log's planted bug `bug` is switched on (never, without the `planted-bugs`
/// feature). A name that is no planted bug of the log is a typo at the call site, which would
/// leave that bug for ever off.
#[cfg(feature = "planted-bugs")]
pub fn active(bug: &str) -> bool {
    switched_on(bug, BUG_NAMES)
}

/// Whether `bug`, one of `known` (a crate's planted bugs: this one's, or the master's), is
/// switched on for this thread or in the environment. The switch every crate's planted bugs
/// share; each crate checks against its own names.
#[cfg(feature = "planted-bugs")]
pub fn switched_on(bug: &str, known: &[&str]) -> bool {
    assert!(known.contains(&bug), "{COMPILED_IN_MARKER}, but none named {bug:?}");
    THREAD_BUGS.with(|bugs| bugs.borrow().iter().any(|name| name == bug)) || named_in_env(bug)
}

/// Whether `RAFTRAIN_PLANTED_BUG` names `bug`: only in a binary built for the harness's proof
/// runs (`planted-bugs-env`, which `cli`'s `planted-bugs` turns on). The simulation needs only
/// its thread's switch, so a whole-workspace build (whose features unify with the
/// simulation's) gives a `raftrain` that obeys no environment variable.
#[cfg(feature = "planted-bugs-env")]
fn named_in_env(bug: &str) -> bool {
    std::env::var(PLANTED_BUG_ENV).is_ok_and(|bugs| bugs.split(',').any(|name| name.trim() == bug))
}

#[cfg(all(feature = "planted-bugs", not(feature = "planted-bugs-env")))]
fn named_in_env(_bug: &str) -> bool {
    false
}

/// Switches exactly `bugs`, each one of `known` (every crate's planted bugs the caller
/// knows), on for code running on this thread (the simulation's).
#[cfg(feature = "planted-bugs")]
pub fn plant_on_this_thread(bugs: &[&str], known: &[&str]) {
    let unknown: Vec<&&str> = bugs.iter().filter(|bug| !known.contains(bug)).collect();
    assert!(unknown.is_empty(), "no planted bug is named {unknown:?}");
    THREAD_BUGS
        .with(|planted| *planted.borrow_mut() = bugs.iter().map(|bug| bug.to_string()).collect());
}

/// Whether `bug` is switched on (never, without the `planted-bugs` feature).
#[cfg(not(feature = "planted-bugs"))]
pub fn active(_bug: &str) -> bool {
    false
}
