//! Exactly-once replies: the last response per client, so a retry is answered, not re-applied.
//!
//! A session must outlive every retry its client can still make: `MasterClient` retries one
//! call for at most its call deadline (30 s), so a session younger than
//! [`SESSION_RETRY_MS_MAX`] is never dropped to make room. Only answers that changed the state
//! take a session (`Response::must_be_replayed`), so refused requests from unknown clients
//! cannot push real ones out. Every operation is O(log n).
//!
//! Sessions come in two pools, so strangers cannot lock out the job's own processes:
//! - **Members**: the client that registered a trainer or claimed a slot is bound to it (the
//!   answer went to that client id, so nobody else can take the binding), one client per
//!   [`Member`]. Registrations and claims are always admitted, members are never evicted nor
//!   forgotten for idleness, and a binding ends only when its member does (trainer lost, slot
//!   released or claimed again): the pool is bounded by the trainer and slot limits.
//! - **Strangers**: every other client, at most [`STRANGER_SESSION_COUNT_MAX`]. When the pool
//!   is full of sessions that may still retry, a new stranger is answered
//!   `Response::TryAgainLater` (with when a place frees up) and nothing changes.
//!
//! A session keeps a digest of the request it answered ([`request_digest`]): a stamp that comes
//! back with another body is not a retry but a client bug or a forgery (`TaskFinished` for
//! task 2 with task 1's stamp, `RegisterTrainer` "mallory" with alice's stamp), and is refused
//! rather than answered with the first request's reply.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::codec;
use super::command::Command;
use super::pserver_slots::PSERVER_COUNT_MAX;
use super::request::ClientStamp;
use super::response::Response;
use super::trainer_registry::TRAINER_COUNT_MAX;

/// A stranger silent for longer than this (by the state's clock) is forgotten; a retry after
/// that is applied again, which is why it is far longer than any client's retry deadline.
pub const SESSION_IDLE_MS_MAX: u64 = 60 * 60 * 1000;
/// The most sessions of clients that are neither a registered trainer's nor a slot holder's:
/// room for tools (status, reporters, evaluators).
pub const STRANGER_SESSION_COUNT_MAX: usize = 4_096;
/// The most sessions bound to members: one per registered trainer and one per slot.
pub const MEMBER_SESSION_COUNT_MAX: usize = TRAINER_COUNT_MAX + PSERVER_COUNT_MAX as usize;
/// The most clients remembered: both pools full.
pub const SESSION_COUNT_MAX: usize = MEMBER_SESSION_COUNT_MAX + STRANGER_SESSION_COUNT_MAX;
/// A session used more recently than this is never evicted: ten times `MasterClient`'s call
/// deadline, so a client still retrying always finds its answer.
pub const SESSION_RETRY_MS_MAX: u64 = 5 * 60 * 1000;

/// What a bound client is to the job: the state can tell whether it is still there.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Member {
    /// A registered trainer, by id.
    Trainer(u64),
    /// The holder of a slot under one generation.
    Slot { slot: u32, generation: u64 },
}

/// A client's last applied request.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct Session {
    pub(crate) seq: u64,
    /// [`request_digest`] of the command, so a stamp reused with another body is refused.
    /// `None` for sessions restored from a snapshot of a build that kept no digest: their
    /// retries are replayed as before (until the client's next write replaces them, or a
    /// stranger's ages out within `SESSION_IDLE_MS_MAX`).
    pub(crate) digest: Option<u64>,
    pub(crate) response: Response,
    pub(crate) last_seen_ms: u64,
    /// The member this client is bound to; `None` for a stranger.
    pub(crate) member: Option<Member>,
}

/// Sessions by client id; the strangers' also by (last use, client id), the members' by
/// member. A job's pool holds [`STRANGER_SESSION_COUNT_MAX`] strangers; a rendezvous run's,
/// whose clients are all strangers, its own `STRANGERS`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct Sessions<const STRANGERS: usize = STRANGER_SESSION_COUNT_MAX> {
    pub(crate) sessions: BTreeMap<u64, Session>,
    pub(crate) strangers_by_age: BTreeSet<(u64, u64)>,
    pub(crate) by_member: BTreeMap<Member, u64>,
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
    /// A new stranger while every stranger's session is in use by a client that may still
    /// retry; one is evictable after `retry_after_ms`.
    Full { retry_after_ms: u64 },
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
/// checkpoint (a path of up to 4 KiB) is refilled from the slot on replay, so thousands of
/// sessions cannot hold megabytes of paths.
fn kept(response: &Response) -> Response {
    match response {
        Response::SlotClaimed { slot, generation, .. } => {
            Response::SlotClaimed { slot: *slot, generation: *generation, checkpoint: None }
        }
        Response::Rendezvous(reply) => Response::Rendezvous(reply.without_value()),
        other => other.clone(),
    }
}

impl<const STRANGERS: usize> Sessions<STRANGERS> {
    /// Forgets idle strangers, then says how to treat the stamped request. `joins` says that
    /// the request makes (or speaks for an unbound) member, so a new client sending it is
    /// admitted whatever the strangers' pool holds.
    pub(crate) fn lookup(
        &mut self,
        stamp: ClientStamp,
        digest: u64,
        joins: bool,
        now_ms: u64,
    ) -> Lookup {
        self.forget_idle(now_ms);
        let Some(session) = self.sessions.get(&stamp.client_id) else {
            return if joins { Lookup::Apply } else { self.room_for_stranger(now_ms) };
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

    /// The answer this client's session kept for exactly this request (same stamp, same
    /// body), without touching anything: how a retried restart finds the incarnation it made
    /// in a job that has ended since (`job_restart.rs`).
    pub(crate) fn answered(&self, stamp: ClientStamp, digest: u64) -> Option<&Response> {
        let session = self.sessions.get(&stamp.client_id)?;
        let same = session.seq == stamp.seq && session.digest.is_none_or(|kept| kept == digest);
        same.then_some(&session.response)
    }

    /// Remembers the answer to a just-applied request, if a retry must get it again, bound to
    /// `member` (which the caller found alive and bound to no other client) or as a stranger.
    /// A stranger that finds no room is not remembered: only a client that stopped being a
    /// member by this very request can meet that, and its retry is fenced by the state.
    pub(crate) fn record(
        &mut self,
        stamp: ClientStamp,
        digest: u64,
        response: &Response,
        member: Option<Member>,
        now_ms: u64,
    ) {
        if !response.must_be_replayed() {
            return;
        }
        let removed = self.remove(stamp.client_id);
        let was_stranger = removed.is_some_and(|session| session.member.is_none());
        if member.is_none() && !was_stranger && !self.make_room(now_ms) {
            return;
        }
        let session = Session {
            seq: stamp.seq,
            digest: Some(digest),
            response: kept(response),
            last_seen_ms: now_ms,
            member,
        };
        self.insert(stamp.client_id, session);
    }

    /// The member `client_id` is bound to.
    pub(crate) fn member_of(&self, client_id: u64) -> Option<Member> {
        self.sessions.get(&client_id).and_then(|session| session.member)
    }

    /// Whether some client is bound to `member`.
    pub(crate) fn is_bound(&self, member: Member) -> bool {
        self.by_member.contains_key(&member)
    }

    /// The members bound to a client, in order.
    pub(crate) fn members(&self) -> impl Iterator<Item = Member> + '_ {
        self.by_member.keys().copied()
    }

    /// `member` is gone: its client becomes a stranger if the strangers' pool has room (or an
    /// evictable place), and is forgotten otherwise (every member's request is fenced by the
    /// member being alive, so a retry applied again changes nothing).
    pub(crate) fn member_gone(&mut self, member: Member, now_ms: u64) {
        let Some(&client_id) = self.by_member.get(&member) else { return };
        let Some(mut session) = self.remove(client_id) else { return };
        if self.make_room(now_ms) {
            session.member = None;
            self.insert(client_id, session);
        }
    }

    /// Every member bound to `slot`, under any generation.
    pub(crate) fn slot_members(&self, slot: u32) -> Vec<Member> {
        let first = Member::Slot { slot, generation: 0 };
        let last = Member::Slot { slot, generation: u64::MAX };
        self.by_member.range(first..=last).map(|(member, _)| *member).collect()
    }

    fn room_for_stranger(&self, now_ms: u64) -> Lookup {
        if self.strangers_by_age.len() < STRANGERS {
            return Lookup::Apply;
        }
        let Some(&(last_seen_ms, _)) = self.strangers_by_age.first() else {
            return Lookup::Apply;
        };
        let evictable_ms = last_seen_ms.saturating_add(SESSION_RETRY_MS_MAX);
        if now_ms > evictable_ms {
            return Lookup::Apply;
        }
        Lookup::Full { retry_after_ms: evictable_ms - now_ms + 1 }
    }

    /// Makes room for one more stranger by evicting the longest-unused strangers that can no
    /// longer retry; `false` if the pool stays full.
    fn make_room(&mut self, now_ms: u64) -> bool {
        while self.strangers_by_age.len() >= STRANGERS {
            let Some(&(last_seen_ms, client_id)) = self.strangers_by_age.first() else {
                return true;
            };
            if now_ms.saturating_sub(last_seen_ms) <= SESSION_RETRY_MS_MAX {
                return false;
            }
            self.remove(client_id);
        }
        true
    }

    fn forget_idle(&mut self, now_ms: u64) {
        while let Some(&(last_seen_ms, client_id)) = self.strangers_by_age.first() {
            if now_ms.saturating_sub(last_seen_ms) <= SESSION_IDLE_MS_MAX {
                return;
            }
            self.remove(client_id);
        }
    }

    fn touch(&mut self, client_id: u64, now_ms: u64) {
        let Some(session) = self.sessions.get_mut(&client_id) else { return };
        if session.member.is_none() {
            self.strangers_by_age.remove(&(session.last_seen_ms, client_id));
            self.strangers_by_age.insert((now_ms, client_id));
        }
        session.last_seen_ms = now_ms;
    }

    fn insert(&mut self, client_id: u64, session: Session) {
        match session.member {
            Some(member) => {
                self.by_member.insert(member, client_id);
            }
            None => {
                self.strangers_by_age.insert((session.last_seen_ms, client_id));
            }
        }
        self.sessions.insert(client_id, session);
    }

    /// Removes a client's session from every index, and returns it.
    fn remove(&mut self, client_id: u64) -> Option<Session> {
        let session = self.sessions.remove(&client_id)?;
        match session.member {
            Some(member) => {
                self.by_member.remove(&member);
            }
            None => {
                self.strangers_by_age.remove(&(session.last_seen_ms, client_id));
            }
        }
        Some(session)
    }

    /// Whether the indices list exactly the sessions (for the invariant checks).
    pub(crate) fn index_matches(&self) -> bool {
        self.strangers_by_age.len() + self.by_member.len() == self.sessions.len()
            && self.sessions.iter().all(|(client_id, session)| match session.member {
                Some(member) => self.by_member.get(&member) == Some(client_id),
                None => self.strangers_by_age.contains(&(session.last_seen_ms, *client_id)),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::dataset::{ChunkRef, QueuePolicy};
    use crate::state::job_state::JobState;
    use crate::state::request::Request;

    /// The flood of the issue: this many stamped writes from fresh client ids.
    const FLOOD_COUNT: u64 = 16_384;

    fn stamped(client_id: u64, seq: u64, now_ms: u64, command: Command) -> Request {
        Request { client: Some(ClientStamp { client_id, seq }), now_ms, term: None, command }
    }

    fn job() -> Command {
        let chunk = ChunkRef {
            path: "data/train.recordio".to_string(),
            offset: 0,
            compressed_size: 80,
            record_count: 10,
        };
        let policy = QueuePolicy {
            chunks_per_task: 1,
            task_timeout_min_ms: 1000,
            timeout_factor: 2,
            max_task_failures: 1,
            retry_failed_next_pass: false,
        };
        Command::ReportDataset { job: "job".into(), chunks: vec![chunk], passes: 1, policy }
    }

    /// Strangers (fresh client ids recording evaluations) fill their own pool and no more; a
    /// trainer that registers and a pserver that claims a slot still get sessions (their
    /// retries are replayed, not applied again), and a stranger beyond the pool is told to try
    /// again later, with nothing changed.
    #[test]
    fn strangers_fill_their_pool_and_members_still_get_sessions() {
        let mut state = JobState::new();
        let report = Request { client: None, now_ms: 0, term: None, command: job() };
        assert!(matches!(state.apply(&report), Response::DatasetAccepted { .. }));
        let eval = Command::RecordEval { pass: 0, loss: 1.0, accuracy: 0.5 };
        let mut refused = 0;
        for client_id in 1..=FLOOD_COUNT {
            match state.apply(&stamped(client_id, 1, client_id, eval.clone())) {
                Response::Accepted => {}
                Response::TryAgainLater { .. } => refused += 1,
                other => panic!("a stranger's evaluation was answered {other:?}"),
            }
        }
        let strangers = state.sessions.sessions.len();
        assert_eq!(strangers, STRANGER_SESSION_COUNT_MAX, "strangers fill exactly their pool");
        assert_eq!(refused, FLOOD_COUNT - STRANGER_SESSION_COUNT_MAX as u64);
        let now_ms = FLOOD_COUNT + 1;

        let register = stamped(u64::MAX, 1, now_ms, Command::RegisterTrainer { name: "t".into() });
        let registered = state.apply(&register);
        assert!(matches!(registered, Response::TrainerRegistered { .. }), "{registered:?}");
        assert_eq!(state.apply(&register), registered, "the registration's retry is replayed");
        let secret = crate::state::SlotSecret::from_bits(7);
        let claim = Command::ClaimPServerSlotWithSecret { addr: "ps:1".into(), desired: 1, secret };
        let claim = stamped(u64::MAX - 1, 1, now_ms, claim);
        let claimed = state.apply(&claim);
        assert!(matches!(claimed, Response::SlotClaimed { .. }), "{claimed:?}");
        assert_eq!(state.apply(&claim), claimed, "the claim's retry is replayed");

        let stranger = state.apply(&stamped(FLOOD_COUNT + 1, 1, now_ms, eval));
        let Response::TryAgainLater { retry_after_ms } = stranger else {
            panic!("a stranger beyond the pool was answered {stranger:?}");
        };
        assert!(retry_after_ms > 0 && retry_after_ms <= SESSION_RETRY_MS_MAX + 1);
        assert_eq!(state.trainer_ids().len(), 1);
    }
}
