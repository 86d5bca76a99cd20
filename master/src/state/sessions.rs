//! Exactly-once replies: the last response per client, so a retry is answered, not re-applied.
//!
//! A session must outlive every retry its client can still make: `MasterClient` retries one
//! call for at most its call deadline (30 s), so a session younger than
//! [`SESSION_RETRY_MS_MAX`] is never dropped to make room. When the table is full of such
//! sessions a new client is refused (and told why) instead. Only answers that changed the
//! state take a session (`Response::must_be_replayed`), so refused requests from unknown
//! clients cannot push real ones out. Every operation is O(log n): sessions are also indexed
//! by when they were last used.
//!
//! A session keeps a digest of the request it answered ([`request_digest`]): a stamp that comes
//! back with another body is not a retry but a client bug or a forgery (`TaskFinished` for
//! task 2 with task 1's stamp, `RegisterTrainer` "mallory" with alice's stamp), and is refused
//! rather than answered with the first request's reply.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::codec;
use super::command::Command;
use super::request::ClientStamp;
use super::response::Response;

/// A client silent for longer than this (by the state's clock) is forgotten; a retry after
/// that is applied again, which is why it is far longer than any client's retry deadline.
pub const SESSION_IDLE_MS_MAX: u64 = 60 * 60 * 1000;
/// The most clients remembered: every trainer and pserver the limits admit, with room for
/// tools (status, reporters, evaluators).
pub const SESSION_COUNT_MAX: usize = 16_384;
/// A session used more recently than this is never evicted: ten times `MasterClient`'s call
/// deadline, so a client still retrying always finds its answer.
pub const SESSION_RETRY_MS_MAX: u64 = 5 * 60 * 1000;

/// A client's last applied request.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct Session {
    pub(crate) seq: u64,
    /// [`request_digest`] of the command, so a stamp reused with another body is refused.
    /// `None` for sessions restored from a snapshot of a build that kept no digest: their
    /// retries are replayed as before (they age out within `SESSION_IDLE_MS_MAX`).
    pub(crate) digest: Option<u64>,
    pub(crate) response: Response,
    pub(crate) last_seen_ms: u64,
}

/// Sessions by client id, and the same sessions by (last use, client id).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct Sessions {
    pub(crate) sessions: BTreeMap<u64, Session>,
    pub(crate) by_age: BTreeSet<(u64, u64)>,
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
    /// The stamp was used for another request body: a client bug or a forgery, refused.
    StampReused,
    /// A new client while every session is in use by a client that may still retry.
    Full,
}

/// FNV-1a (64-bit) of the command's bincode: deterministic on every replica and build (unlike
/// `std`'s hashers), and cheap next to applying the command. Not a cryptographic digest: it
/// tells a retry from a different request of the same client, whose collisions would need the
/// client itself to search for them.
pub(crate) fn request_digest(command: &Command) -> u64 {
    const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0100_0000_01b3;
    codec::encode(command)
        .iter()
        .fold(FNV_OFFSET_BASIS, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(FNV_PRIME))
}

/// The answer as a session keeps it: without what the state can give again. A claim's
/// checkpoint (a path of up to 4 KiB) is refilled from the slot on replay, so 16,384 sessions
/// cannot hold 64 MiB of paths.
fn kept(response: &Response) -> Response {
    match response {
        Response::SlotClaimed { index, generation, .. } => {
            Response::SlotClaimed { index: *index, generation: *generation, checkpoint: None }
        }
        other => other.clone(),
    }
}

impl Sessions {
    /// Forgets idle sessions, then says how to treat the stamped request.
    pub(crate) fn lookup(&mut self, stamp: ClientStamp, digest: u64, now_ms: u64) -> Lookup {
        self.forget_idle(now_ms);
        let Some(session) = self.sessions.get(&stamp.client_id) else {
            return self.room_for_new(now_ms);
        };
        if stamp.seq > session.seq {
            return Lookup::Apply;
        }
        if stamp.seq < session.seq {
            return Lookup::Stale { last_seq: session.seq };
        }
        if session.digest.is_some_and(|kept| kept != digest) {
            return Lookup::StampReused;
        }
        let response = session.response.clone();
        self.touch(stamp.client_id, now_ms);
        Lookup::Replay(response)
    }

    /// Remembers the answer to a just-applied request, if a retry must get it again.
    pub(crate) fn record(
        &mut self,
        stamp: ClientStamp,
        digest: u64,
        response: &Response,
        now_ms: u64,
    ) {
        if !response.must_be_replayed() {
            return;
        }
        if !self.sessions.contains_key(&stamp.client_id) {
            self.make_room(now_ms);
        }
        self.remove(stamp.client_id);
        let session = Session {
            seq: stamp.seq,
            digest: Some(digest),
            response: kept(response),
            last_seen_ms: now_ms,
        };
        self.by_age.insert((now_ms, stamp.client_id));
        self.sessions.insert(stamp.client_id, session);
    }

    fn room_for_new(&self, now_ms: u64) -> Lookup {
        if self.sessions.len() < SESSION_COUNT_MAX || self.oldest_evictable(now_ms).is_some() {
            Lookup::Apply
        } else {
            Lookup::Full
        }
    }

    fn make_room(&mut self, now_ms: u64) {
        while self.sessions.len() >= SESSION_COUNT_MAX {
            let oldest = self
                .oldest_evictable(now_ms)
                .expect("lookup admitted the client only if a session could be evicted");
            self.remove(oldest);
        }
    }

    /// The longest-unused session, if it is old enough that its client no longer retries.
    fn oldest_evictable(&self, now_ms: u64) -> Option<u64> {
        let (last_seen_ms, client_id) = *self.by_age.first()?;
        (now_ms.saturating_sub(last_seen_ms) > SESSION_RETRY_MS_MAX).then_some(client_id)
    }

    fn forget_idle(&mut self, now_ms: u64) {
        while let Some(&(last_seen_ms, client_id)) = self.by_age.first() {
            if now_ms.saturating_sub(last_seen_ms) <= SESSION_IDLE_MS_MAX {
                return;
            }
            self.remove(client_id);
        }
    }

    fn touch(&mut self, client_id: u64, now_ms: u64) {
        if let Some(session) = self.sessions.get_mut(&client_id) {
            self.by_age.remove(&(session.last_seen_ms, client_id));
            session.last_seen_ms = now_ms;
            self.by_age.insert((now_ms, client_id));
        }
    }

    fn remove(&mut self, client_id: u64) {
        if let Some(session) = self.sessions.remove(&client_id) {
            self.by_age.remove(&(session.last_seen_ms, client_id));
        }
    }

    /// Whether the age index lists exactly the sessions (for the invariant checks).
    pub(crate) fn index_matches(&self) -> bool {
        self.by_age.len() == self.sessions.len()
            && self.sessions.iter().all(|(client_id, session)| {
                self.by_age.contains(&(session.last_seen_ms, *client_id))
            })
    }
}
