//! The bounds a received Raft RPC must keep before openraft sees it. openraft 0.9 trusts its
//! peers: a Vote or AppendEntries whose term is near `u64::MAX` is granted, and the next
//! election computes `term + 1` and panics the node; an InstallSnapshot chunk at an offset near
//! `u64::MAX` overflows the receiver's offset, and one far past any real snapshot makes the
//! in-memory snapshot buffer grow to that size. A forged, corrupted or buggy message must never
//! do either, so such a request is refused here and changes nothing (term, vote, leader, log).

use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use openraft::{LogId, Vote};

use crate::snapshot_file::SNAPSHOT_BYTES_MAX;
use crate::TypeConfig;

/// A request's term may be at most this far above the receiver's own term. A legitimate term
/// grows by one per election, and an election starts only after an election timeout (at least
/// `2 x heartbeat_ms + 1`, so hundreds of ms in practice): a node campaigning alone needs days
/// (2^20 x 0.5 s = 6 days at the default) to get this far ahead, and even then it rejoins,
/// because the leader's AppendEntries *response* carrying the higher term (not a request, so
/// not refused here) makes the leader adopt it. Meanwhile the bound keeps every term this node
/// adopts within `2^20` of its own, so `u64::MAX` is out of reach of any single message.
pub(crate) const TERM_AHEAD_MAX: u64 = 1 << 20;

/// No term may exceed this, whatever the receiver's own term: every term this node adopts
/// stays this far from `u64::MAX`, so openraft's `term + 1` cannot overflow. At one election a
/// millisecond a group needs 146,000 years to get here.
pub(crate) const TERM_MAX: u64 = 1 << 62;

/// No log index may exceed this. At a million entries a second a group needs 146,000 years to
/// reach it, and it keeps every `index + 1` in openraft far from overflow.
pub(crate) const LOG_INDEX_MAX: u64 = 1 << 62;

/// Why a request was refused, for the sender's log and ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("refused a {rpc} request: {reason}")]
pub(crate) struct Refusal {
    /// `Vote`, `AppendEntries` or `InstallSnapshot`.
    pub(crate) rpc: &'static str,
    /// Which bound the request broke.
    pub(crate) reason: String,
}

/// Checks a Vote request against a receiver whose term is `own_term`.
pub(crate) fn check_vote(own_term: u64, request: &VoteRequest<u64>) -> Result<(), Refusal> {
    let refuse = |reason| Refusal { rpc: "Vote", reason };
    let term = check_term(own_term, &request.vote).map_err(refuse)?;
    check_log_id(request.last_log_id.as_ref(), term).map_err(refuse)
}

/// Checks an AppendEntries request against a receiver whose term is `own_term`: the leader's
/// term, and every log id it carries (no entry can be newer than the leader that sends it).
pub(crate) fn check_append(
    own_term: u64,
    request: &AppendEntriesRequest<TypeConfig>,
) -> Result<(), Refusal> {
    let refuse = |reason| Refusal { rpc: "AppendEntries", reason };
    let term = check_term(own_term, &request.vote).map_err(refuse)?;
    check_log_id(request.prev_log_id.as_ref(), term).map_err(refuse)?;
    check_log_id(request.leader_commit.as_ref(), term).map_err(refuse)?;
    for entry in &request.entries {
        check_log_id(Some(&entry.log_id), term).map_err(refuse)?;
    }
    Ok(())
}

/// Checks an InstallSnapshot chunk against a receiver whose term is `own_term`: the term, the
/// snapshot's log ids, and that the chunk lies within the largest snapshot file.
pub(crate) fn check_install(
    own_term: u64,
    request: &InstallSnapshotRequest<TypeConfig>,
) -> Result<(), Refusal> {
    let refuse = |reason| Refusal { rpc: "InstallSnapshot", reason };
    let term = check_term(own_term, &request.vote).map_err(refuse)?;
    check_log_id(request.meta.last_log_id.as_ref(), term).map_err(refuse)?;
    check_log_id(request.meta.last_membership.log_id().as_ref(), term).map_err(refuse)?;
    let end = request.offset.checked_add(request.data.len() as u64);
    if end.is_none_or(|end| end > SNAPSHOT_BYTES_MAX) {
        let reason = format!(
            "a chunk of {} bytes at offset {} ends past the largest snapshot ({SNAPSHOT_BYTES_MAX} bytes)",
            request.data.len(),
            request.offset
        );
        return Err(refuse(reason));
    }
    Ok(())
}

/// The request's term, if it is at most [`TERM_AHEAD_MAX`] above `own_term`.
fn check_term(own_term: u64, vote: &Vote<u64>) -> Result<u64, String> {
    let term = vote.leader_id().term;
    if term > TERM_MAX {
        return Err(format!("term {term} is above {TERM_MAX}"));
    }
    if term > own_term.saturating_add(TERM_AHEAD_MAX) {
        return Err(format!(
            "term {term} is more than {TERM_AHEAD_MAX} above this node's {own_term}"
        ));
    }
    Ok(term)
}

/// A log id must be no newer than the term of the request that carries it, and its index must
/// be below [`LOG_INDEX_MAX`].
fn check_log_id(log_id: Option<&LogId<u64>>, request_term: u64) -> Result<(), String> {
    let Some(log_id) = log_id else {
        return Ok(());
    };
    if log_id.leader_id.term > request_term {
        return Err(format!("log id {log_id} is newer than the request's term {request_term}"));
    }
    if log_id.index > LOG_INDEX_MAX {
        return Err(format!("log id {log_id} has an index above {LOG_INDEX_MAX}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, LeaderId};

    use super::*;

    fn log_id(term: u64, index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    fn check(own_term: u64, term: u64, last_log_id: Option<LogId<u64>>, accepted: bool) {
        let vote = Vote { leader_id: LeaderId::new(term, 2), committed: false };
        let request = VoteRequest { vote, last_log_id };
        let result = check_vote(own_term, &request);
        assert_eq!(result.is_ok(), accepted, "own {own_term}, term {term}: {result:?}");
    }

    /// Terms within the bound pass; overflowing or absurd terms and log ids are refused.
    #[test]
    fn bounds_vote_terms_and_log_ids() {
        check(5, 6, Some(log_id(5, 10)), true);
        check(5, 5 + TERM_AHEAD_MAX, None, true);
        check(5, 6 + TERM_AHEAD_MAX, None, false);
        check(5, u64::MAX, None, false);
        check(TERM_MAX - 1, TERM_MAX, None, true);
        check(TERM_MAX, TERM_MAX + 1, None, false);
        check(5, 6, Some(log_id(7, 10)), false);
        check(5, 6, Some(log_id(6, LOG_INDEX_MAX + 1)), false);
    }
}
