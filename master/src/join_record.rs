//! What a `--join` master keeps of its own admission: `JOINED` in its data directory, the index
//! of the first committed membership that listed it (the answer to its addition or its
//! promotion), written durably. A later membership that leaves it out removed this directory's master,
//! whatever its own log holds: so a master removed while it still asks to join, or while it
//! was down, is a removed master and asks nothing (it never comes back by asking again), and
//! a directory whose master the group never listed still asks.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;
use client::Membership;

/// The file a `--join` master notes its admission in.
pub(crate) const JOINED_FILE: &str = "JOINED";

/// Where a joining master stands in the leader's membership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Listed as a voter.
    Voter,
    /// Listed as a learner: its promotion is still to ask.
    Learner,
    /// Not listed, and never listed by a membership up to this one: it asks to be added.
    Absent,
    /// Not listed by a membership later than one that listed it: removed, and why.
    Removed(String),
}

/// The admission record of one data directory (0: never listed).
#[derive(Debug)]
pub(crate) struct JoinRecord {
    dir: PathBuf,
    listed_at: AtomicU64,
}

impl JoinRecord {
    /// Reads the record of `dir`; none yet is a directory never listed. A file that is not a
    /// membership index is refused naming it.
    pub(crate) fn open(dir: &Path) -> anyhow::Result<Self> {
        let path = dir.join(JOINED_FILE);
        let listed_at = match std::fs::read_to_string(&path) {
            Ok(text) => {
                text.trim().parse::<u64>().ok().filter(|index| *index > 0).with_context(|| {
                    format!("{}: holds {text:?}, not the index of a membership", path.display())
                })?
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
            Err(error) => return Err(error).with_context(|| format!("read {}", path.display())),
        };
        Ok(Self { dir: dir.to_path_buf(), listed_at: AtomicU64::new(listed_at) })
    }

    /// The index of the first membership that listed this directory's master, if any did.
    pub(crate) fn listed_at(&self) -> Option<u64> {
        Some(self.listed_at.load(Ordering::Acquire)).filter(|index| *index > 0)
    }

    /// Where the master `id` stands in `members` (a whole membership, no change half done).
    pub(crate) fn standing(&self, members: &Membership, id: u64) -> Standing {
        standing(members, id, self.listed_at())
    }

    /// Notes `members`, the membership a change was answered with (committed), as the first
    /// listing of the master `id` when it lists it and none was noted before.
    pub(crate) fn note_committed(&self, members: &Membership, id: u64) -> anyhow::Result<()> {
        let listed = members.members.iter().any(|member| member.id == id);
        if listed && !members.joint && self.listed_at().is_none() {
            self.note_listed(members.membership_index)?;
        }
        Ok(())
    }

    fn note_listed(&self, index: u64) -> anyhow::Result<()> {
        storage::durable_file::write_durably(&self.dir, JOINED_FILE, index.to_string().as_bytes())
            .with_context(|| format!("write {}", self.dir.join(JOINED_FILE).display()))?;
        self.listed_at.store(index, Ordering::Release);
        tracing::info!(membership_index = index, "listed by the group's leader");
        Ok(())
    }
}

/// Where `id` stands in `members`, given the first membership that listed it (`listed_at`).
pub(crate) fn standing(members: &Membership, id: u64, listed_at: Option<u64>) -> Standing {
    if let Some(row) = members.members.iter().find(|member| member.id == id) {
        return if row.voter { Standing::Voter } else { Standing::Learner };
    }
    match listed_at {
        Some(listed_at) if members.membership_index > listed_at => {
            let ids: Vec<u64> = members.members.iter().map(|member| member.id).collect();
            Standing::Removed(format!(
                "the leader, member {} in term {}, lists members {ids:?} since entry {}, after \
                 entry {listed_at} listed this master",
                members.leader_id, members.term, members.membership_index
            ))
        }
        _ => Standing::Absent,
    }
}

#[cfg(test)]
#[path = "join_record/tests.rs"]
mod tests;
