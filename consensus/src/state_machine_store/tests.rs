//! The state machine store: applies wait for durability, each entry keeps its term, a snapshot
//! build racing an install never rolls back, an oversized state keeps the previous snapshot.

use openraft::{CommittedLeaderId, EntryPayload};

use super::*;
use crate::kv::{KvCommand, KvStore};
use crate::{ApplyError, Commands, RestoreError};

/// The command `TermRecorder` cannot apply (as a newer build's command would be).
const UNAPPLIABLE: &[u8] = b"newer";

/// Records the term each command was applied with.
#[derive(Default)]
struct TermRecorder {
    terms: Vec<u64>,
}

impl StateMachine for TermRecorder {
    fn apply(&mut self, command: &[u8], entry_term: u64) -> Result<Vec<u8>, ApplyError> {
        if command == UNAPPLIABLE {
            return Err(ApplyError::new("a newer build's command: upgrade me"));
        }
        self.terms.push(entry_term);
        Ok(Vec::new())
    }

    fn snapshot(&self) -> Vec<u8> {
        Vec::new()
    }

    fn restore(&mut self, _snapshot: &[u8]) -> Result<(), RestoreError> {
        Ok(())
    }
}

fn entry(term: u64, index: u64, commands: usize) -> Entry {
    let log_id = LogId::new(CommittedLeaderId::new(term, 1), index);
    let payload = EntryPayload::Normal(Commands(vec![b"c".to_vec(); commands]));
    Entry { log_id, payload }
}

/// An entry the machine cannot apply fails the apply (which stops the Raft core) with the
/// machine's reason, and the applied index stays where the entry before it left it.
#[tokio::test]
async fn an_unappliable_command_fails_the_apply_and_is_not_applied() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut store = StateMachineStore::open(dir.path(), TermRecorder::default())
        .expect("an empty snapshot dir opens");
    store.apply(vec![entry(2, 1, 1)]).await.expect("entry 1 applies");
    let log_id = LogId::new(CommittedLeaderId::new(2, 1), 2);
    let payload = EntryPayload::Normal(Commands(vec![b"c".to_vec(), UNAPPLIABLE.to_vec()]));
    let error = store.apply(vec![Entry { log_id, payload }]).await.expect_err("not appliable");
    assert!(error.to_string().contains("upgrade me"), "{error}");
    assert_eq!(store.applied().last_applied.map(|log_id| log_id.index), Some(1));
}

/// With the durability gate attached (a leader acknowledges its own appends before they are
/// durable), an entry is applied, and so its writers answered, only once the log's flush
/// covers it; a failed flush fails the apply, which stops the Raft core.
#[tokio::test]
async fn apply_waits_until_the_entries_are_durable() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut store = StateMachineStore::open(dir.path(), TermRecorder::default())
        .expect("an empty snapshot dir opens");
    let durable = crate::DurableLog::new(Some(entry(2, 1, 1).log_id));
    store.apply_when_durable(durable.watch());
    store.apply(vec![entry(2, 1, 1)]).await.expect("entry 1 is durable: applied at once");

    let mut applying = store.clone();
    let apply = tokio::spawn(async move { applying.apply(vec![entry(2, 2, 1)]).await });
    tokio::task::yield_now().await;
    assert!(!apply.is_finished(), "entry 2 is not durable: not applied");
    assert_eq!(store.read(|machine| machine.terms.len()), 1);
    durable.flushed(entry(2, 2, 1).log_id);
    apply.await.expect("the task runs").expect("entry 2 is applied once durable");
    assert_eq!(store.read(|machine| machine.terms.len()), 2);

    durable.failed(&std::io::Error::other("the disk is gone"));
    assert!(store.apply(vec![entry(2, 3, 1)]).await.is_err(), "never durable: an error");
    assert_eq!(store.read(|machine| machine.terms.len()), 2);
}

/// Every command is applied with the term of the entry that carries it.
#[tokio::test]
async fn apply_passes_each_entry_term() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut store = StateMachineStore::open(dir.path(), TermRecorder::default())
        .expect("an empty snapshot dir opens");
    let entries = vec![entry(2, 1, 2), entry(3, 2, 1), entry(7, 3, 1)];
    store.apply(entries).await.expect("apply never fails");
    assert_eq!(store.read(|machine| machine.terms.clone()), vec![2, 2, 3, 7]);
}

/// A machine whose `snapshot` takes a while, so an install can start during a build.
#[derive(Default)]
struct SlowSnapshots {
    applied: u64,
}

impl StateMachine for SlowSnapshots {
    fn apply(&mut self, _command: &[u8], _entry_term: u64) -> Result<Vec<u8>, ApplyError> {
        self.applied += 1;
        Ok(Vec::new())
    }

    fn snapshot(&self) -> Vec<u8> {
        std::thread::sleep(std::time::Duration::from_millis(300));
        self.applied.to_le_bytes().to_vec()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        let bytes = snapshot.try_into().map_err(|_| RestoreError::new("not 8 bytes"))?;
        self.applied = u64::from_le_bytes(bytes);
        Ok(())
    }
}

/// A build that read the state before an install started never puts its older snapshot
/// back: after both, the current snapshot and the newest file are the installed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_racing_an_install_never_rolls_the_snapshot_back() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut store = StateMachineStore::open(dir.path(), SlowSnapshots::default())
        .expect("an empty snapshot dir opens");
    store.apply(vec![entry(1, 1, 1), entry(1, 2, 1)]).await.expect("apply never fails");

    let mut builder = store.get_snapshot_builder().await;
    let build = tokio::spawn(async move { builder.build_snapshot().await });
    // The build is now inside `snapshot()`; the install arrives meanwhile.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let installed_id = Some(LogId::new(CommittedLeaderId::new(2, 1), 10));
    let meta = SnapshotMeta {
        last_log_id: installed_id,
        last_membership: StoredMembership::default(),
        snapshot_id: "2-10-installed".to_string(),
    };
    let contents = SnapshotContents { meta: meta.clone(), state: 10u64.to_le_bytes().to_vec() };
    let bytes = contents.encode().expect("a snapshot encodes");
    store.install_snapshot(&meta, Box::new(Cursor::new(bytes))).await.expect("installs");
    build.await.expect("the build task runs").expect("the build succeeds");

    let current = store.get_current_snapshot().await.expect("reads").expect("a snapshot");
    assert_eq!(current.meta.last_log_id, installed_id);
    let (_, newest, _) = SnapshotDir::open(dir.path())
        .expect("opens")
        .load_newest()
        .expect("loads")
        .expect("a file");
    assert_eq!(newest.meta.last_log_id, installed_id);
    assert_eq!(store.read(|machine| machine.applied), 10);
}

/// A state over the limit is not built, and not an error (openraft would stop): the build
/// answers with the previous snapshot, so nothing newer is recorded and nothing is purged.
#[tokio::test]
async fn an_oversized_state_keeps_the_previous_snapshot() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut store = StateMachineStore::open_with_state_limit(dir.path(), KvStore::default(), 64);
    let put = |key: &str, value: usize| {
        let command = KvCommand::Put { key: key.to_string(), value: "v".repeat(value) };
        Commands(vec![command.encode()])
    };
    let entry = |index, commands| Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(commands),
    };
    store.apply(vec![entry(1, put("a", 1))]).await.expect("applies");
    let small = store.get_snapshot_builder().await.build_snapshot().await.expect("builds");
    assert_eq!(small.meta.last_log_id.map(|id| id.index), Some(1));

    store.apply(vec![entry(2, put("b", 100))]).await.expect("applies");
    let refused = store.get_snapshot_builder().await.build_snapshot().await;
    let refused = refused.expect("an oversized state is not an error");
    assert_eq!(refused.meta, small.meta, "the previous snapshot stands");
    assert_eq!(*store.durable_snapshots().borrow(), small.meta.last_log_id);
}

fn membership_entry(index: u64, voters: &[u64]) -> Entry {
    let nodes: BTreeMap<u64, BasicNode> =
        voters.iter().map(|id| (*id, BasicNode::new(format!("127.0.0.1:{id}")))).collect();
    let membership = openraft::Membership::new(vec![nodes.keys().copied().collect()], nodes);
    let log_id = LogId::new(CommittedLeaderId::new(1, 1), index);
    Entry { log_id, payload: EntryPayload::Membership(membership) }
}

/// Each member's last listing is noted as memberships apply: a member the log's last membership
/// leaves out (its removal, replayed on restart) still has the one before, and the snapshot's
/// membership seeds a reopened store.
#[tokio::test]
async fn the_last_membership_listing_each_member_is_noted() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut store = StateMachineStore::open(dir.path(), TermRecorder::default())
        .expect("an empty snapshot dir opens");
    assert_eq!(store.last_listed(3), None);
    let entries =
        vec![membership_entry(1, &[1, 2, 3]), entry(1, 2, 1), membership_entry(3, &[1, 2])];
    store.apply(entries).await.expect("applies");
    assert_eq!((store.last_listed(1), store.last_listed(3)), (Some(3), Some(1)));
    assert_eq!(store.last_listed(4), None);

    store.apply(vec![membership_entry(4, &[1, 3])]).await.expect("applies");
    store.get_snapshot_builder().await.build_snapshot().await.expect("builds");
    let reopened = StateMachineStore::open(dir.path(), TermRecorder::default()).expect("reopens");
    assert_eq!((reopened.last_listed(3), reopened.last_listed(2)), (Some(4), None));
}
