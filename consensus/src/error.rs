//! The errors of the node's public operations: starting, writing, reading.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::config::ConfigError;

/// A node that cannot start. Each variant names what a human must look at.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot use the Raft log in {}: {reason}", dir.display())]
    Storage { dir: PathBuf, reason: String },
    #[error("snapshot file {} is unusable: {reason}", path.display())]
    Snapshot { path: PathBuf, reason: String },
    #[error(
        "data dir {} was bootstrapped as node {recorded_id} with peers {}; \
         this start says node {configured_id} with --peers {}",
        dir.display(), format_peers(recorded_peers), format_peers(configured_peers)
    )]
    BootstrapMismatch {
        dir: PathBuf,
        recorded_id: u64,
        recorded_peers: BTreeMap<u64, String>,
        configured_id: u64,
        configured_peers: BTreeMap<u64, String>,
    },
    #[error("cannot create directory {}: {source}", path.display())]
    Directory { path: PathBuf, source: std::io::Error },
    #[error("raft failed: {0}")]
    Raft(String),
}

/// A write (or linearizable read) that did not happen here.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum WriteError {
    /// Expected: this node does not lead. Retry on the leader, if one is known.
    #[error("not the leader; the leader is {leader_id:?} at {leader_addr:?}")]
    ForwardToLeader { leader_id: Option<u64>, leader_addr: Option<String> },
    /// The command can never be written: entries must stay small.
    #[error("command is {size_bytes} bytes; at most {size_bytes_max} bytes are allowed")]
    CommandTooLarge { size_bytes: usize, size_bytes_max: usize },
    /// The outcome is unknown: the command may still commit.
    #[error("no answer after {timeout_ms} ms; the outcome is unknown")]
    Timeout { timeout_ms: u64 },
    /// This node leads but could not reach a quorum to confirm it.
    #[error("cannot reach a quorum: {reason}")]
    NoQuorum { reason: String },
    /// The node is shutting down or has failed.
    #[error("the raft node has stopped: {reason}")]
    Stopped { reason: String },
}

/// `1=host:port,2=host:port`, the flag syntax, for messages.
pub fn format_peers(peers: &BTreeMap<u64, String>) -> String {
    let items: Vec<String> = peers.iter().map(|(id, addr)| format!("{id}={addr}")).collect();
    items.join(",")
}

/// A node that did not stop cleanly.
#[derive(Debug, thiserror::Error)]
#[error("the raft node did not shut down cleanly: {reason}")]
pub struct ShutdownError {
    pub reason: String,
}
