//! `QuietVotes`: a logging layer that drops openraft's error lines for a vote request to a peer
//! that is down. A candidate asks every peer for its vote each election timeout (a few hundred
//! milliseconds), and openraft logs each failed request at ERROR (`while requesting vote` with
//! an `Unreachable node` error, or a vote `timeout`): a master whose peers are down, at a
//! group's start or through a majority's outage, wrote two such lines a peer every election,
//! about 14 KB a second. The consensus crate already logs such a peer once a minute as it
//! stays down (`peer unreachable`) and once as it answers again. Other errors of openraft's
//! core, and a vote a peer answered with an error, still go through.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// The target openraft's vote requests log under.
const RAFT_CORE: &str = "openraft::core::raft_core";

/// Drops the vote-request errors of an unreachable or silent peer; passes every other event.
pub(crate) struct QuietVotes;

impl<S: Subscriber> Layer<S> for QuietVotes {
    fn event_enabled(&self, event: &Event<'_>, _context: Context<'_, S>) -> bool {
        if event.metadata().target() != RAFT_CORE {
            return true;
        }
        let mut fields = VoteFields::default();
        event.record(&mut fields);
        !fields.peer_down()
    }
}

/// The `message` and `error` of an openraft core event, as text.
#[derive(Default)]
struct VoteFields {
    message: String,
    error: String,
}

impl VoteFields {
    /// Whether the event is a vote request that found its peer down (unreachable, or silent
    /// until the request timed out).
    fn peer_down(&self) -> bool {
        let unreachable =
            self.message == "while requesting vote" && self.error.starts_with("Unreachable node");
        let timed_out = self.message == "timeout" && self.error.contains(" when Vote ");
        unreachable || timed_out
    }
}

impl Visit for VoteFields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            "error" => self.error = format!("{value:?}"),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    /// Counts the events that reach it.
    struct Counted(Arc<Mutex<Vec<String>>>);

    impl<S: Subscriber> Layer<S> for Counted {
        fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
            let mut fields = VoteFields::default();
            event.record(&mut fields);
            self.0.lock().expect("lock").push(fields.message);
        }
    }

    /// A vote request to an unreachable or silent peer is dropped; the same words from
    /// another target, another error of the core, and a vote refused by a peer that answered
    /// pass.
    #[test]
    fn drops_only_the_vote_errors_of_a_peer_that_is_down() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber =
            tracing_subscriber::registry().with(Counted(Arc::clone(&seen))).with(QuietVotes);
        tracing::subscriber::with_default(subscriber, || {
            let down = "Unreachable node: tcp connect error";
            tracing::error!(target: "openraft::core::raft_core", error = %down, target = "2", "while requesting vote");
            let silent = "timeout after 150ms when Vote 1->2";
            tracing::error!(target: "openraft::core::raft_core", error = %silent, target = "2", "timeout");
            let remote = "RemoteError: storage failed";
            tracing::error!(target: "openraft::core::raft_core", error = %remote, target = "2", "while requesting vote");
            tracing::error!(target: "openraft::core::raft_core", error = %down, "quit RaftCore::main on error");
            tracing::error!(target: "consensus", error = %down, "while requesting vote");
        });
        let seen = seen.lock().expect("lock").clone();
        let expected =
            ["while requesting vote", "quit RaftCore::main on error", "while requesting vote"];
        assert_eq!(seen, expected);
    }
}
