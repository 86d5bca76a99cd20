//! Bugs planted on purpose, to show the fault harness (`jepsen-tests`) catches them. They
//! exist only in a build with the `planted-bugs` feature, which no default build of any
//! workspace member enables (the simulation's and `cli`'s features of that name do), and each
//! is switched on by name in `RAFTRAIN_PLANTED_BUG` (comma-separated):
//!
//! - `skip-epoch-check`: `TaskFinished` (and a hand-off's finished receipts) is applied under
//!   the task's current epoch, whatever epoch the trainer reported (PaddlePaddle's master
//!   accepted late reports).
//! - `answer-before-commit`: `TaskFinished` is answered "accepted" at once and proposed in
//!   the background; a leader that loses its quorum loses the report.
//! - `stale-status`: `Status` is answered from the local state of whichever master is asked,
//!   leader or not, without confirming leadership.
//! - `deposed-heartbeats`: trainer and pserver heartbeats are answered by any node that
//!   believes it leads, without a quorum confirming it: a deposed leader tells a pserver it
//!   still holds a slot the new leader gave away.
//! - `leases-across-terms`: the leader's lease tables survive a change of term (and stepping
//!   down), so a node that leads again judges holders by leases granted in an old term and
//!   declares live ones lost at once.
//! - `claim-another-incarnation`: a granted `ClaimPServerSlot` names the next job id as the
//!   slot's incarnation, so the pserver keeps its files in another job's directory.
//! - `restore-revives-ended`: a restore of a job that ended (cancelled or finished) is not
//!   refused, and puts it back to running, as a restore once did.
//! - `rendezvous-stale-version`: a rendezvous `CompareVersion` also writes when it names the
//!   version just before the key's current one, so an agent that read a stale version
//!   overwrites a newer rendezvous state (torch's backend fences with that version).
//!
//! The replicated log's own (`jammed-batcher`) is in `consensus/src/planted.rs`.

pub use platform::planted::PLANTED_BUG_ENV;

/// The master's planted bugs, by name.
pub const BUG_NAMES: &[&str] = &[
    "skip-epoch-check",
    "answer-before-commit",
    "stale-status",
    "deposed-heartbeats",
    "leases-across-terms",
    "restore-revives-ended",
    "claim-another-incarnation",
    "rendezvous-stale-version",
];

platform::planted_bug_switch!(BUG_NAMES);
