//! Why leader discovery found no master leader to call ([`DiscoveryError`]), with what each
//! master answered ([`Unanswered`]).

use crate::error::ClientError;

/// Why a `MasterClient` has no leader to send an attempt to; the call backs off and asks
/// again.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DiscoveryError {
    /// No master named a leader: what each one answered instead, in the order of `--masters`.
    #[error("no leader found ({})", joined(.masters))]
    NoLeader { masters: Vec<Unanswered> },
    /// A master named a leader whose address makes no client.
    #[error("{0}")]
    BadLeaderAddress(ClientError),
    /// The leader found was forgotten (a redirect or rediscovery raced) before it was used.
    #[error("the leader was forgotten at once")]
    LeaderForgotten,
}

/// One master that named no leader, and why.
#[derive(Debug, thiserror::Error)]
#[error("{addr}: {reason}")]
pub(crate) struct Unanswered {
    /// The master's address as `--masters` gave it.
    pub(crate) addr: String,
    pub(crate) reason: AskFailure,
}

/// Why asking one master who leads gave no leader.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AskFailure {
    /// It answered, but knows no leader in its term (an election is under way).
    #[error("no leader known in term {term}")]
    NoLeaderKnown { term: u64 },
    /// Its address makes no client.
    #[error("{0}")]
    BadAddress(ClientError),
    /// It answered the ClusterInfo call with an error (or did not answer in time).
    #[error("{code:?}: {message}")]
    Status { code: tonic::Code, message: String },
    /// The task that asked it panicked or was cancelled.
    #[error("{reason}")]
    AskerLost { reason: String },
}

fn joined(masters: &[Unanswered]) -> String {
    let reasons: Vec<String> = masters.iter().map(Unanswered::to_string).collect();
    reasons.join("; ")
}
