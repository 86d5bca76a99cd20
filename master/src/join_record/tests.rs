//! Where a joining master stands, and its record on disk.

use client::{MemberRow, Membership};

use super::{standing, JoinRecord, Standing, JOINED_FILE};

fn membership(index: u64, members: &[(u64, bool)]) -> Membership {
    let row = |(id, voter): &(u64, bool)| MemberRow {
        id: *id,
        addr: format!("m{id}:7000"),
        voter: *voter,
        matched: None,
        lag: None,
    };
    Membership {
        leader_id: 1,
        term: 3,
        last_log_index: index,
        membership_index: index,
        joint: false,
        members: members.iter().map(row).collect(),
    }
}

#[test]
fn a_listed_master_is_a_voter_or_a_learner_whatever_its_record() {
    let members = membership(9, &[(1, true), (4, false), (5, true)]);
    assert_eq!(standing(&members, 4, None), Standing::Learner);
    assert_eq!(standing(&members, 5, Some(3)), Standing::Voter);
}

#[test]
fn a_master_never_listed_asks_and_one_left_out_after_its_listing_was_removed() {
    let members = membership(9, &[(1, true), (2, true)]);
    assert_eq!(standing(&members, 4, None), Standing::Absent);
    // The membership that listed it is the newest the leader has: not a removal (an Add whose
    // answer was read from a leader that lost it, say).
    assert_eq!(standing(&members, 4, Some(9)), Standing::Absent);
    match standing(&members, 4, Some(7)) {
        Standing::Removed(why) => {
            assert!(why.contains("since entry 9, after entry 7"), "{why}");
            assert!(why.contains("[1, 2]"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_first_committed_listing_is_written_once_and_read_back() {
    let dir = tempfile::tempdir().expect("a directory");
    let record = JoinRecord::open(dir.path()).expect("no record yet");
    assert_eq!(record.listed_at(), None);
    record.note_committed(&membership(4, &[(1, true)]), 4).expect("not listed: nothing noted");
    let mut joint = membership(5, &[(1, true), (4, true)]);
    joint.joint = true;
    record.note_committed(&joint, 4).expect("half done: nothing noted");
    assert_eq!(record.listed_at(), None);
    let learner = membership(6, &[(1, true), (4, false)]);
    record.note_committed(&learner, 4).expect("noted");
    record.note_committed(&membership(8, &[(1, true), (4, true)]), 4).expect("kept");
    assert_eq!(record.listed_at(), Some(6));
    let again = JoinRecord::open(dir.path()).expect("the record");
    assert_eq!(again.listed_at(), Some(6));
    assert!(matches!(again.standing(&membership(9, &[(1, true)]), 4), Standing::Removed(_)));
    assert_eq!(again.standing(&learner, 4), Standing::Learner);
}

#[test]
fn a_record_that_is_not_an_index_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().expect("a directory");
    for bad in ["", "0", "twelve", "-3"] {
        std::fs::write(dir.path().join(JOINED_FILE), bad).expect("write");
        let error = JoinRecord::open(dir.path()).expect_err(bad).to_string();
        assert!(error.contains(JOINED_FILE) && error.contains("not the index"), "{error}");
    }
}
