//! The snapshot's layouts: the current one behind a marker, and the unmarked one of older
//! builds (sessions without request digests), read and converted so an upgrade keeps its
//! snapshots.
//!
//! bincode is not self-describing, so a layout change needs a way to tell layouts apart. The
//! old layout begins with the state's clock as a varint, whose first byte is never 0xFF
//! (bincode's varints use 0..=253 for a `u64`); the current layout begins with
//! [`SNAPSHOT_MARKER`] and a version byte.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::codec::{self, DecodeError, SNAPSHOT_BYTES_MAX};
use super::dataset_loading::DatasetLoading;
use super::eval::EvalRecord;
use super::job::Job;
use super::master_state::MasterState;
use super::pserver_slots::PServerSlots;
use super::response::Response;
use super::sessions::{Session, Sessions};
use super::trainer_registry::TrainerRegistry;

/// The first byte of a marked snapshot: no unmarked snapshot can begin with it.
const SNAPSHOT_MARKER: u8 = 0xFF;
/// The layout this build writes: 2 adds request digests to sessions (1 is the unmarked one).
const SNAPSHOT_LAYOUT_VERSION: u8 = 2;

/// Encodes the state as a marked snapshot of the current layout.
pub(crate) fn encode(state: &MasterState) -> Vec<u8> {
    let mut bytes = vec![SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION];
    bytes.extend_from_slice(&codec::encode(state));
    bytes
}

/// Decodes either layout; the caller checks the invariants.
pub(crate) fn decode(bytes: &[u8]) -> Result<MasterState, DecodeError> {
    match bytes {
        [SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION, body @ ..] => {
            codec::decode(body, SNAPSHOT_BYTES_MAX, "snapshot")
        }
        [SNAPSHOT_MARKER, ..] => Err(DecodeError::Retired { what: "snapshot" }),
        unmarked => {
            let legacy: LegacyState = codec::decode(unmarked, SNAPSHOT_BYTES_MAX, "snapshot")?;
            Ok(legacy.into())
        }
    }
}

/// The state as builds before request digests wrote it (field for field).
#[derive(Serialize, Deserialize)]
struct LegacyState {
    clock_ms: u64,
    job: Option<Job>,
    trainers: TrainerRegistry,
    pservers: PServerSlots,
    eval: Option<EvalRecord>,
    sessions: LegacySessions,
    loading: Option<DatasetLoading>,
}

#[derive(Serialize, Deserialize)]
struct LegacySessions {
    sessions: BTreeMap<u64, LegacySession>,
    by_age: BTreeSet<(u64, u64)>,
}

/// A session that kept the method code of its request instead of a digest of it.
#[derive(Serialize, Deserialize)]
struct LegacySession {
    seq: u64,
    method: u8,
    response: Response,
    last_seen_ms: u64,
}

impl From<LegacyState> for MasterState {
    fn from(legacy: LegacyState) -> Self {
        let sessions = legacy
            .sessions
            .sessions
            .into_iter()
            .map(|(client_id, session)| {
                let LegacySession { seq, method: _, response, last_seen_ms } = session;
                (client_id, Session { seq, digest: None, response, last_seen_ms })
            })
            .collect();
        MasterState {
            clock_ms: legacy.clock_ms,
            job: legacy.job,
            trainers: legacy.trainers,
            pservers: legacy.pservers,
            eval: legacy.eval,
            sessions: Sessions { sessions, by_age: legacy.sessions.by_age },
            loading: legacy.loading,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::request::ClientStamp;

    /// A snapshot of the unmarked layout (sessions with method codes) decodes, its sessions
    /// replay retries as before, and the state re-encodes in the marked layout.
    #[test]
    fn an_unmarked_snapshot_of_an_older_build_still_decodes() {
        let mut legacy_sessions = BTreeMap::new();
        let session = LegacySession {
            seq: 4,
            method: 6,
            response: Response::TrainerRegistered { trainer: 1 },
            last_seen_ms: 10,
        };
        legacy_sessions.insert(77, session);
        let legacy = LegacyState {
            clock_ms: 10,
            job: None,
            trainers: TrainerRegistry::default(),
            pservers: PServerSlots::default(),
            eval: None,
            sessions: LegacySessions {
                sessions: legacy_sessions,
                by_age: BTreeSet::from([(10, 77)]),
            },
            loading: None,
        };
        let bytes = codec::encode(&legacy);
        assert_ne!(bytes[0], SNAPSHOT_MARKER);
        let mut state = MasterState::decode(&bytes).expect("the old layout decodes");
        let replay = state.sessions.lookup(ClientStamp { client_id: 77, seq: 4 }, 123, 11);
        assert!(matches!(replay, super::super::sessions::Lookup::Replay(_)), "{replay:?}");
        let marked = state.encode();
        assert_eq!(&marked[..2], &[SNAPSHOT_MARKER, SNAPSHOT_LAYOUT_VERSION]);
        assert_eq!(MasterState::decode(&marked).expect("the new layout decodes"), state);
    }

    /// A marked snapshot of a layout this build does not know is refused, not misread.
    #[test]
    fn an_unknown_marked_layout_is_refused() {
        let mut bytes = MasterState::new().encode();
        bytes[1] = SNAPSHOT_LAYOUT_VERSION + 1;
        assert!(matches!(decode(&bytes), Err(DecodeError::Retired { .. })));
    }
}
