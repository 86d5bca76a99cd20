//! The contract between the replicated log and the application it drives.

/// What the application (the master's task queue) implements.
///
/// Deterministic: `apply` depends only on the state, the command and the entry's term (no
/// clock, no randomness, no I/O), so every replica that applies the same log reaches the same
/// state.
pub trait StateMachine: Send + Sync + 'static {
    /// Applies one committed command and returns the response handed to the writer.
    /// `entry_term` is the term of the log entry that carries the command (the term of the
    /// leader that proposed it): the same on every replica, so a decision can record the term
    /// it was made in.
    ///
    /// `Err` when this build cannot apply the command at all (it does not decode, or needs a
    /// newer build): the node's Raft core stops (fail-stop) rather than answer something the
    /// other replicas, which can apply it, would not; nothing of the command is applied.
    fn apply(&mut self, command: &[u8], entry_term: u64) -> Result<Vec<u8>, ApplyError>;

    /// The full serialized state, as `restore` takes it back.
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the whole state with a snapshot taken by `snapshot` (possibly on another node).
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError>;
}

/// A committed command this build cannot apply: the replica must stop, not diverge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot apply a committed command: {message}")]
pub struct ApplyError {
    /// What this build lacks, for the operator ("upgrade this master ...").
    pub message: String,
}

impl ApplyError {
    /// An apply error with the given explanation.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}

/// A snapshot the application cannot read back.
#[derive(Debug, thiserror::Error)]
#[error("cannot restore the state machine from a snapshot: {message}")]
pub struct RestoreError {
    /// What is wrong with the snapshot, for a human.
    pub message: String,
}

impl RestoreError {
    /// A restore error with the given explanation.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}
