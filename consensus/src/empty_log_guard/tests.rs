//! The guard's rules, request by request.

use openraft::error::RaftError;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Vote};

use super::EmptyLogGuard;
use crate::TypeConfig;

fn log_id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn vote_request(last_index: Option<u64>) -> VoteRequest<u64> {
    VoteRequest::new(Vote::new(7, 2), last_index.map(|index| log_id(6, index)))
}

fn append(
    prev: Option<u64>,
    entries: &[u64],
    commit: Option<u64>,
) -> AppendEntriesRequest<TypeConfig> {
    AppendEntriesRequest {
        vote: Vote::new_committed(7, 1),
        prev_log_id: prev.map(|index| log_id(7, index)),
        entries: entries
            .iter()
            .map(|index| Entry { log_id: log_id(7, *index), payload: EntryPayload::Blank })
            .collect(),
        leader_commit: commit.map(|index| log_id(7, index)),
    }
}

const SUCCESS: Result<AppendEntriesResponse<u64>, RaftError<u64>> =
    Ok(AppendEntriesResponse::Success);

#[test]
fn a_node_that_had_a_vote_is_never_held_back() {
    let guard = EmptyLogGuard::new(true);
    assert!(!guard.holding());
    assert_eq!(guard.check_vote(&vote_request(Some(500))), Ok(()));
}

#[test]
fn an_empty_node_votes_in_the_first_election_only() {
    let guard = EmptyLogGuard::new(false);
    assert_eq!(guard.check_vote(&vote_request(None)), Ok(()), "no log at all");
    assert_eq!(guard.check_vote(&vote_request(Some(0))), Ok(()), "the initial membership");
    let refusal = guard.check_vote(&vote_request(Some(1))).expect_err("a candidate with a history");
    assert_eq!(refusal.rpc, "Vote");
    assert!(refusal.reason.contains("empty data directory"), "{}", refusal.reason);
    assert!(refusal.reason.contains("index 1"), "{}", refusal.reason);
}

#[test]
fn it_votes_again_once_an_append_reached_the_leaders_commit_index() {
    let guard = EmptyLogGuard::new(false);
    guard.after_append(guard.reaches_commit(&append(None, &[], Some(40))), &SUCCESS);
    assert!(guard.holding(), "an empty heartbeat reaches nothing");
    guard.after_append(guard.reaches_commit(&append(Some(10), &[11, 12], Some(40))), &SUCCESS);
    assert!(guard.holding(), "entries up to 12 of 40 committed");
    let conflict = Ok(AppendEntriesResponse::Conflict);
    guard.after_append(guard.reaches_commit(&append(Some(38), &[39, 40], Some(40))), &conflict);
    assert!(guard.holding(), "a refused append changed nothing here");
    guard.after_append(guard.reaches_commit(&append(Some(38), &[39, 40, 41], Some(40))), &SUCCESS);
    assert!(!guard.holding(), "the log reaches the commit index");
    assert_eq!(guard.check_vote(&vote_request(Some(41))), Ok(()));
}

#[test]
fn a_heartbeat_after_a_snapshot_can_catch_it_up() {
    let guard = EmptyLogGuard::new(false);
    guard.after_append(guard.reaches_commit(&append(Some(900), &[], Some(900))), &SUCCESS);
    assert!(!guard.holding(), "a matched log at the commit index");
}

#[test]
fn a_follower_behind_every_newest_commit_votes_again_once_it_reaches_an_earlier_one() {
    let guard = EmptyLogGuard::new(false);
    guard.after_append(guard.reaches_commit(&append(Some(0), &[1, 2, 3, 4, 5], Some(8))), &SUCCESS);
    assert!(guard.holding(), "entries up to 5, the first commit announced 8");
    // Under a steady load each batch ends behind the commit the other follower's acks made.
    guard.after_append(guard.reaches_commit(&append(Some(5), &[6, 7, 8, 9], Some(15))), &SUCCESS);
    assert!(!guard.holding(), "the log reaches 8, the first commit announced since it opened");
}

#[test]
fn a_commit_of_an_earlier_term_sets_no_target() {
    let guard = EmptyLogGuard::new(false);
    let mut request = append(Some(38), &[39, 40, 41], None);
    request.leader_commit = Some(log_id(6, 40));
    guard.after_append(guard.reaches_commit(&request), &SUCCESS);
    assert!(guard.holding(), "a new leader's commit from the term before covers too little");
    guard.after_append(guard.reaches_commit(&append(Some(41), &[42], Some(42))), &SUCCESS);
    assert!(!guard.holding(), "its own term's first commit, reached");
}
