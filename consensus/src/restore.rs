//! Seeds the data directory of one member of a new group from a saved state (`raftrain
//! snapshot restore`): the state installed as the member's snapshot, and an empty log whose
//! bootstrap record names the new peers, so the member starts from that state. Every member of
//! the new group is seeded from the same saved state and starts as a new cluster identity:
//!
//! - Its log ids and votes start [`RESTORED_TERM_GAP`] terms above the saved entry's term (the
//!   snapshot's last log id is `(saved term + gap, saved index)`). A member of the old group
//!   sends Raft RPCs in terms far below, which the new members refuse (a lower term); a new
//!   member's RPC to an old member is more than `rpc_bounds::TERM_AHEAD_MAX` above its term,
//!   which the old member refuses as forged. An old member that adopts a new term anyway (from
//!   an answer to its own request) holds a log whose last term is below every new member's,
//!   so it never wins an election in the new group, and its entries never enter it.
//! - The bootstrap record names the new peers: a restored directory refuses to start with any
//!   other `--peers`, and an old directory refuses the new ones.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use openraft::{
    BasicNode, CommittedLeaderId, LogId, Membership, SnapshotMeta, StoredMembership, Vote,
};

use crate::error::StartError;
use crate::log_store::{BootstrapRecord, LogStore};
use crate::rpc_bounds::{TERM_AHEAD_MAX, TERM_MAX};
use crate::snapshot_file::{SnapshotContents, SnapshotDir, STATE_SNAPSHOT_BYTES_MAX};

/// How far above the saved term a restored group's terms start: twice the furthest ahead a
/// Raft request may be (`rpc_bounds::TERM_AHEAD_MAX`), so no old member's term is within
/// reach of a new member's, nor the other way round, until the old group has run a million
/// elections since the save.
pub const RESTORED_TERM_GAP: u64 = 2 * TERM_AHEAD_MAX;

/// How long to wait for the seeded log's files to close.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// The saved state a member is seeded from.
#[derive(Clone, Copy, Debug)]
pub struct SavedState<'a> {
    /// The index of the last entry the state holds, and that entry's term.
    pub index: u64,
    pub term: u64,
    /// The state machine's encoding (`StateMachine::snapshot`).
    pub state: &'a [u8],
}

/// Why a data directory was not seeded.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    #[error("data dir {} is not empty: a restore seeds only a new, empty directory", dir.display())]
    NotEmpty { dir: PathBuf },
    #[error("node {id} is not one of the peers {peers}")]
    NotAPeer { id: u64, peers: String },
    #[error("the saved state is {size} bytes, over the {max} a snapshot may hold")]
    TooLarge { size: usize, max: usize },
    #[error("the saved term {term} is too high to restore above (terms stop at {TERM_MAX})")]
    TermTooHigh { term: u64 },
    #[error(transparent)]
    Start(#[from] StartError),
}

/// Seeds `data_dir` (which must not exist or be empty) as member `id` of a new group of
/// `peers`, starting from `saved`. Returns the log id the member starts from.
pub async fn seed_member(
    data_dir: &Path,
    id: u64,
    peers: &BTreeMap<u64, String>,
    saved: SavedState<'_>,
) -> Result<LogId<u64>, SeedError> {
    let Some(&lowest) = peers.keys().next().filter(|_| peers.contains_key(&id)) else {
        return Err(SeedError::NotAPeer { id, peers: crate::format_peers(peers) });
    };
    if saved.state.len() > STATE_SNAPSHOT_BYTES_MAX {
        let (size, max) = (saved.state.len(), STATE_SNAPSHOT_BYTES_MAX);
        return Err(SeedError::TooLarge { size, max });
    }
    let term = match saved.term.checked_add(RESTORED_TERM_GAP) {
        Some(term) if term < TERM_MAX => term,
        _ => return Err(SeedError::TermTooHigh { term: saved.term }),
    };
    refuse_non_empty(data_dir)?;
    let log_id = LogId::new(CommittedLeaderId::new(term, lowest), saved.index);
    let voters: BTreeSet<u64> = peers.keys().copied().collect();
    let nodes: BTreeMap<u64, BasicNode> =
        peers.iter().map(|(id, addr)| (*id, BasicNode::new(addr))).collect();
    let membership = StoredMembership::new(Some(log_id), Membership::new(vec![voters], nodes));
    let snapshot_id = format!("restored-{term}-{}", saved.index);
    let meta = SnapshotMeta { last_log_id: Some(log_id), last_membership: membership, snapshot_id };
    let contents = SnapshotContents { meta: meta.clone(), state: saved.state.to_vec() };
    let snapshots = SnapshotDir::open(&data_dir.join("snapshots"))?;
    let bytes = contents.encode().map_err(|source| directory(data_dir, source))?;
    snapshots.write(&meta, &bytes).map_err(|source| directory(data_dir, source))?;
    let (mut log, closed) = LogStore::open(&data_dir.join("sled"))?;
    let record = BootstrapRecord { node_id: id, peers: peers.clone() };
    // A vote in the restored term for no one in particular: the first election is above it.
    let seeded = log.seed_restored(&record, log_id, Vote::new(term, lowest)).await;
    drop(log);
    closed
        .wait(CLOSE_TIMEOUT)
        .await
        .map_err(|reason| StartError::Storage { dir: data_dir.join("sled"), reason })?;
    seeded?;
    Ok(log_id)
}

fn directory(path: &Path, source: std::io::Error) -> SeedError {
    SeedError::Start(StartError::Directory { path: path.to_path_buf(), source })
}

fn refuse_non_empty(dir: &Path) -> Result<(), SeedError> {
    match std::fs::read_dir(dir).map(|mut entries| entries.next().is_some()) {
        Ok(true) => Err(SeedError::NotEmpty { dir: dir.to_path_buf() }),
        Ok(false) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|source| directory(dir, source))
        }
        Err(source) => Err(directory(dir, source)),
    }
}
