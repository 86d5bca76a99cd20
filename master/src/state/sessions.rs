//! Exactly-once replies: the last response per client, so a retry is answered, not re-applied.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::request::ClientStamp;
use super::response::Response;

/// A client silent for longer than this (by the leaders' `now_ms`) is forgotten; a retry after
/// that is applied again, which is why it is far longer than any client's retry deadline.
pub const SESSION_IDLE_MS_MAX: u64 = 60 * 60 * 1000;
/// The most clients remembered; beyond it the longest-idle one is forgotten.
pub const SESSION_COUNT_MAX: usize = 4096;

/// A client's last applied request.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct Session {
    pub(crate) seq: u64,
    pub(crate) response: Response,
    pub(crate) last_seen_ms: u64,
}

/// Sessions by client id.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct Sessions {
    pub(crate) sessions: BTreeMap<u64, Session>,
}

/// What to do with a stamped request.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// A new sequence number: apply it.
    Apply,
    /// A retry of the last request: answer this without applying.
    Replay(Response),
    /// Older than the last request: answer `StaleRequest`.
    Stale { last_seq: u64 },
}

impl Sessions {
    pub(crate) fn lookup(&mut self, stamp: ClientStamp, now_ms: u64) -> Lookup {
        let Some(session) = self.sessions.get_mut(&stamp.client_id) else {
            return Lookup::Apply;
        };
        if stamp.seq > session.seq {
            return Lookup::Apply;
        }
        if stamp.seq < session.seq {
            return Lookup::Stale { last_seq: session.seq };
        }
        session.last_seen_ms = now_ms;
        Lookup::Replay(session.response.clone())
    }

    /// Remembers the response to a just-applied request, then forgets idle or excess clients.
    pub(crate) fn record(&mut self, stamp: ClientStamp, response: Response, now_ms: u64) {
        let session = Session { seq: stamp.seq, response, last_seen_ms: now_ms };
        self.sessions.insert(stamp.client_id, session);
        self.sessions.retain(|_, session| {
            now_ms.saturating_sub(session.last_seen_ms) <= SESSION_IDLE_MS_MAX
        });
        while self.sessions.len() > SESSION_COUNT_MAX {
            // Oldest by last use, ties broken by client id so every replica evicts the same one.
            let oldest = self
                .sessions
                .iter()
                .min_by_key(|(client_id, session)| (session.last_seen_ms, **client_id))
                .map(|(client_id, _)| *client_id)
                .expect("the map holds more than SESSION_COUNT_MAX sessions");
            self.sessions.remove(&oldest);
        }
    }
}
