//! Bugs planted on purpose in the replicated log, switched by `platform::planted` like every
//! crate's (the master names its own: `master/src/planted.rs`):
//!
//! - `jammed-batcher`: a proposed entry's writers wait for openraft's answer only, with no end
//!   at a leadership change or the write timeout: the first wave's bug. An entry replaced by a
//!   snapshot install is never answered, so a leader paused, overtaken and elected again holds
//!   its batcher slots for ever and commits nothing.
//! - `membership-ack-before-commit`: a membership change is answered as done once it is
//!   proposed, without waiting for openraft to commit it (and, for a joint change, without
//!   proposing the uniform configuration that ends it): a removal so answered may leave the
//!   member a voter, which an operator then wipes and adds back.

/// The log's planted bugs, by name.
pub const BUG_NAMES: &[&str] = &["jammed-batcher", "membership-ack-before-commit"];

platform::planted_bug_switch!(BUG_NAMES);
