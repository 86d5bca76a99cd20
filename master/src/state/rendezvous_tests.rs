//! The rendezvous key space through `MasterState::apply`: c10d's semantics, versions,
//! exactly-once retries, and every bound.

use super::command::Command;
use super::master_state::MasterState;
use super::rendezvous_op::{
    RendezvousEntry, RendezvousOp, RendezvousReply, KEYS_PER_RUN_MAX, KEY_BYTES_MAX, RUN_BYTES_MAX,
    RUN_COUNT_MAX, VALUE_BYTES_MAX,
};
use super::request::{ClientStamp, Request};
use super::response::Response;

fn apply(
    state: &mut MasterState,
    client: Option<(u64, u64)>,
    run: &str,
    op: RendezvousOp,
) -> Response {
    let client = client.map(|(client_id, seq)| ClientStamp { client_id, seq });
    let command = Command::Rendezvous { run: run.to_string(), op };
    let before = state.clone();
    let response = state.apply(&Request { client, now_ms: 1_000, term: None, command });
    state.check_invariants().expect("the state stays valid");
    MasterState::check_transition(&before, state).expect("the step is allowed");
    response
}

fn set(key: &str, value: &[u8]) -> RendezvousOp {
    RendezvousOp::Set { key: key.into(), value: value.to_vec() }
}

fn written(value: &[u8], version: u64, set: bool) -> Response {
    let entry = Some(RendezvousEntry { value: value.to_vec(), version });
    Response::Rendezvous(RendezvousReply::Written { entry, set })
}

#[test]
fn compare_set_follows_c10d_stores() {
    let mut state = MasterState::new();
    let cas = |expected: &[u8], value: &[u8]| RendezvousOp::CompareSet {
        key: "k".into(),
        expected: expected.to_vec(),
        value: value.to_vec(),
    };
    let absent = Response::Rendezvous(RendezvousReply::Written { entry: None, set: false });
    assert_eq!(apply(&mut state, None, "r", cas(b"x", b"a")), absent, "absent, expected given");
    assert!(state.rendezvous.runs.is_empty(), "a write that wrote nothing makes no run");
    assert_eq!(apply(&mut state, None, "r", cas(b"", b"a")), written(b"a", 1, true));
    assert_eq!(apply(&mut state, None, "r", cas(b"b", b"c")), written(b"a", 1, false));
    assert_eq!(apply(&mut state, None, "r", cas(b"a", b"c")), written(b"c", 2, true));
}

#[test]
fn compare_version_writes_only_over_the_version_it_names() {
    let mut state = MasterState::new();
    let cv = |version, value: &[u8]| RendezvousOp::CompareVersion {
        key: "state".into(),
        version,
        value: value.to_vec(),
    };
    assert_eq!(apply(&mut state, None, "r", cv(0, b"one")), written(b"one", 1, true));
    assert_eq!(
        apply(&mut state, None, "r", cv(0, b"two")),
        written(b"one", 1, false),
        "0: absent only"
    );
    assert_eq!(
        apply(&mut state, None, "r", cv(7, b"two")),
        written(b"one", 1, false),
        "a foreign version"
    );
    assert_eq!(apply(&mut state, None, "r", cv(1, b"two")), written(b"two", 2, true));
    assert_eq!(
        apply(&mut state, None, "r", cv(1, b"three")),
        written(b"two", 2, false),
        "a stale version"
    );
}

#[test]
fn a_retried_add_counts_once_and_a_retried_write_answers_its_own_version() {
    let mut state = MasterState::new();
    let add = RendezvousOp::Add { key: "n".into(), delta: 3 };
    let added = Response::Rendezvous(RendezvousReply::Added { value: 3, version: 1 });
    assert_eq!(apply(&mut state, Some((9, 1)), "r", add.clone()), added);
    assert_eq!(apply(&mut state, Some((9, 1)), "r", add.clone()), added, "the retry is answered");
    let again = Response::Rendezvous(RendezvousReply::Added { value: 6, version: 2 });
    assert_eq!(apply(&mut state, Some((9, 2)), "r", add), again);
    let mine =
        RendezvousOp::CompareVersion { key: "s".into(), version: 0, value: b"mine".to_vec() };
    assert_eq!(apply(&mut state, Some((9, 3)), "r", mine.clone()), written(b"mine", 3, true));
    apply(&mut state, Some((5, 1)), "r", set("s", b"theirs"));
    assert_eq!(
        apply(&mut state, Some((9, 3)), "r", mine),
        written(b"mine", 3, true),
        "a retry after another write still says what this one wrote, at its own version"
    );
    let other = set("s", b"forged");
    assert_eq!(apply(&mut state, Some((9, 3)), "r", other), Response::StampReused { seq: 3 });
}

#[test]
fn add_counts_on_decimal_integers_only() {
    let mut state = MasterState::new();
    apply(&mut state, None, "r", set("n", b"41"));
    let add = |delta| RendezvousOp::Add { key: "n".into(), delta };
    let added = Response::Rendezvous(RendezvousReply::Added { value: 42, version: 2 });
    assert_eq!(apply(&mut state, None, "r", add(1)), added);
    apply(&mut state, None, "r", set("n", b"forty"));
    assert!(matches!(apply(&mut state, None, "r", add(1)), Response::Rejected { .. }));
    apply(&mut state, None, "r", set("n", i64::MAX.to_string().as_bytes()));
    assert!(matches!(apply(&mut state, None, "r", add(1)), Response::Rejected { .. }));
}

#[test]
fn every_bound_refuses_and_changes_nothing() {
    let mut state = MasterState::new();
    let long_key = "k".repeat(KEY_BYTES_MAX + 1);
    assert!(matches!(
        apply(&mut state, None, "r", set(&long_key, b"v")),
        Response::Rejected { .. }
    ));
    assert!(matches!(apply(&mut state, None, "", set("k", b"v")), Response::Rejected { .. }));
    let big = vec![0; VALUE_BYTES_MAX + 1];
    assert!(matches!(apply(&mut state, None, "r", set("k", &big)), Response::Rejected { .. }));
    assert!(state.rendezvous.runs.is_empty());
    let value = vec![1; VALUE_BYTES_MAX];
    let fits = (RUN_BYTES_MAX / (VALUE_BYTES_MAX as u64 + 2)) as usize;
    for index in 0..fits {
        let written = apply(&mut state, None, "r", set(&format!("{index:02}"), &value));
        assert!(matches!(written, Response::Rendezvous(_)), "value {index} fits the run");
    }
    let over = apply(&mut state, None, "r", set("last", &value));
    assert!(matches!(over, Response::RendezvousFull { .. }), "the run's bytes are full");
    let before = state.clone();
    for index in 0..KEYS_PER_RUN_MAX {
        apply(&mut state, None, "many", set(&format!("{index}"), b""));
    }
    let over = apply(&mut state, None, "many", set("one-more", b""));
    assert!(matches!(over, Response::RendezvousFull { .. }), "the run's keys are full");
    assert_ne!(state, before);
    for run in 2..RUN_COUNT_MAX {
        apply(&mut state, None, &format!("run-{run}"), set("k", b"v"));
    }
    let over = apply(&mut state, None, "one-run-too-many", set("k", b"v"));
    assert!(matches!(over, Response::RendezvousFull { .. }), "the group's runs are full");
    assert!(!state.rendezvous.runs.contains_key("one-run-too-many"));
    let written_to_r = apply(&mut state, None, "r", set("00", b"small"));
    assert!(matches!(written_to_r, Response::Rendezvous(_)), "a full group still serves its runs");
}

#[test]
fn an_expiry_removes_only_a_run_untouched_since() {
    let mut state = MasterState::new();
    apply(&mut state, None, "r", set("k", b"v"));
    let remove = |touched_ms| Command::RemoveRendezvous { run: "r".into(), touched_ms };
    let request = |command| Request { client: None, now_ms: 2_000, term: None, command };
    let kept = state.apply(&request(remove(Some(999))));
    assert_eq!(kept, Response::RendezvousRemoved { existed: false });
    assert!(state.rendezvous.runs.contains_key("r"));
    let removed = state.apply(&request(remove(Some(1_000))));
    assert_eq!(removed, Response::RendezvousRemoved { existed: true });
    apply(&mut state, None, "r", set("k", b"v"));
    assert_eq!(state.apply(&request(remove(None))), Response::RendezvousRemoved { existed: true });
    let deleted = apply(&mut state, None, "r", RendezvousOp::Delete { key: "k".into() });
    assert_eq!(deleted, Response::Rendezvous(RendezvousReply::Deleted { existed: false }));
    assert!(state.rendezvous.runs.is_empty(), "a delete makes no run");
}
