//! The switch every crate's planted bugs share. Bugs are planted on purpose to show the
//! simulation and the fault harness (`jepsen-tests`) catch them; each crate names its own
//! (`consensus::planted`, `master::planted`, `pserver::planted`) and asks [`switched_on`]
//! with its names. They exist only with the `planted-bugs` feature (which those crates'
//! features of that name turn on; no default build of any workspace member does), and each is
//! switched on by name, for one thread ([`plant_on_this_thread`]: the simulation runs every
//! node on one thread, so seeds running side by side in other threads stay clean) or, in the
//! harness's proof binary only (`planted-bugs-env`), in `RAFTRAIN_PLANTED_BUG`
//! (comma-separated).

/// The environment variable naming the planted bugs to switch on.
pub const PLANTED_BUG_ENV: &str = "RAFTRAIN_PLANTED_BUG";

/// Words only a build with the planted bugs carries (in [`switched_on`]'s assertion, which
/// every planted bug's call site reaches): tests look for them in binaries to prove a default
/// build carries no planted code (`cli/tests/it/planted_bugs.rs`) and that one built with the
/// feature does (`simulation/tests/it/planted_bugs.rs`).
pub const COMPILED_IN_MARKER: &str = "raftrain built with planted bugs";

#[cfg(feature = "planted-bugs")]
thread_local! {
    static THREAD_BUGS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether `bug`, one of `known` (the calling crate's planted bugs), is switched on for this
/// thread or in the environment. A name that is none of `known` is a typo at the call site,
/// which would leave that bug for ever off: it panics.
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

/// Defines `active(bug)`, whether the calling crate's planted bug `bug` (one of `$names`, its
/// `BUG_NAMES`) is switched on: through [`switched_on`] with the calling crate's
/// `planted-bugs` feature, never without it.
#[macro_export]
macro_rules! planted_bug_switch {
    ($names:expr) => {
        /// Whether this crate's planted bug `bug` is switched on (never, without the
        /// `planted-bugs` feature); a name that is none of this crate's panics.
        #[cfg(feature = "planted-bugs")]
        pub fn active(bug: &str) -> bool {
            $crate::planted::switched_on(bug, $names)
        }

        /// Whether `bug` is switched on: never, without the `planted-bugs` feature.
        #[cfg(not(feature = "planted-bugs"))]
        pub fn active(_bug: &str) -> bool {
            false
        }
    };
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
