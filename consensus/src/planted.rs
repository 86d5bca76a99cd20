//! Bugs planted on purpose in the replicated log, to show the fault harness (`jepsen-tests`)
//! catches them. They exist only with the `planted-bugs` feature (which the master's feature of
//! the same name turns on, and release builds never do), and each is switched on by name in
//! `RAFTRAIN_PLANTED_BUG` (comma-separated), like the master's (`master/src/planted.rs`):
//!
//! - `jammed-batcher`: a proposed entry's writers wait for openraft's answer only, with no end
//!   at a leadership change or the write timeout: the first wave's bug. An entry replaced by a
//!   snapshot install is never answered, so a leader paused, overtaken and elected again holds
//!   its batcher slots for ever and commits nothing.

/// The environment variable naming the planted bugs to switch on.
pub const PLANTED_BUG_ENV: &str = "RAFTRAIN_PLANTED_BUG";

/// Whether `bug` is switched on (never, without the `planted-bugs` feature).
#[cfg(feature = "planted-bugs")]
pub fn active(bug: &str) -> bool {
    std::env::var(PLANTED_BUG_ENV).is_ok_and(|bugs| bugs.split(',').any(|name| name.trim() == bug))
}

/// Whether `bug` is switched on (never, without the `planted-bugs` feature).
#[cfg(not(feature = "planted-bugs"))]
pub fn active(_bug: &str) -> bool {
    false
}
