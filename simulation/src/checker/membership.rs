//! Membership changes: the group's configuration changes only through joint consensus, and a
//! change answered as done is committed. Read from the canonical log's membership entries, in
//! order, and from the changes the membership nemesis was told are done:
//! - each configuration shares a voter set with the one before (openraft's coherent steps,
//!   whose quorums all intersect: a uniform `[A]` is followed by `[A]` with other learners or
//!   by the joint `[A, B]`; a joint `[A, B]` by its uniform `[B]`, by `[A]` when a change is
//!   taken back, or by `[B, C]` when another change follows one left halfway);
//! - a removal answered as done shows in the committed membership at once (the member is in
//!   none of its sets), an addition lists the member, a promotion makes it a voter of a uniform
//!   configuration: openraft answers a change once the entry that ends it is applied;
//! - and it notes when each member (by id and life: a wiped disk is a new member) was removed,
//!   for `removed_members`.

use std::collections::BTreeMap;

use openraft::LogId;

use super::{CanonicalLog, Violation};
use crate::observer::MembershipSeen;

/// A membership change the nemesis asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberChangeKind {
    AddLearner,
    Promote,
    Remove,
}

/// A change answered as done, by the leader's `ConsensusNode`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckedChange {
    pub kind: MemberChangeKind,
    pub id: u64,
    /// When the answer came (simulated ms).
    pub at_ms: u64,
}

/// Where the membership checker has read up to, and what it learnt.
#[derive(Default)]
pub struct MembershipChanges {
    next_index: u64,
    /// The last committed configuration read, and the index of its entry.
    current: Option<(u64, MembershipSeen)>,
    /// When each member, by id and life, was removed: the log id of the committed entry whose
    /// configuration no longer lists it.
    removed: BTreeMap<(u64, u64), LogId<u64>>,
    /// How many membership entries were committed.
    entries_read: u64,
}

impl MembershipChanges {
    /// Reads the canonical log's new membership entries (`lives`: how many times each node's
    /// disk was wiped so far), then judges the changes answered since the last step.
    pub fn check(
        &mut self,
        canonical: &CanonicalLog,
        lives: &BTreeMap<u64, u64>,
        acked: &[AckedChange],
    ) -> Result<(), Violation> {
        while let Some(entry) = canonical.entries.get(&self.next_index) {
            self.next_index += 1;
            let Some(seen) = &entry.membership else { continue };
            self.entries_read += 1;
            self.read(entry.log_id, seen, lives)?;
        }
        acked.iter().try_for_each(|change| self.check_acked(change))
    }

    fn read(
        &mut self,
        log_id: LogId<u64>,
        seen: &MembershipSeen,
        lives: &BTreeMap<u64, u64>,
    ) -> Result<(), Violation> {
        let life = |id: u64| lives.get(&id).copied().unwrap_or(0);
        if let Some((index, before)) = &self.current {
            if !coherent(before, seen) {
                return Err(Violation::new(
                    "membership joint consensus",
                    format!(
                        "the configuration {:?} committed at {log_id} follows {:?} (index \
                         {index}) without a joint step",
                        seen.configs, before.configs
                    ),
                ));
            }
            for gone in before.nodes.difference(&seen.nodes) {
                self.removed.insert((*gone, life(*gone)), log_id);
            }
        }
        for member in &seen.nodes {
            self.removed.remove(&(*member, life(*member)));
        }
        self.current = Some((log_id.index, seen.clone()));
        Ok(())
    }

    /// A change answered as done shows in the committed membership.
    fn check_acked(&self, change: &AckedChange) -> Result<(), Violation> {
        let Some((index, current)) = &self.current else {
            return Err(acked_violation(change, "no membership committed"));
        };
        let id = change.id;
        let shows = match change.kind {
            MemberChangeKind::AddLearner => current.nodes.contains(&id),
            MemberChangeKind::Promote => {
                !current.joint() && current.configs.iter().all(|voters| voters.contains(&id))
            }
            MemberChangeKind::Remove => !current.joint() && !current.nodes.contains(&id),
        };
        match shows {
            true => Ok(()),
            false => {
                let why = format!(
                    "the committed membership (index {index}) is {:?} with members {:?}",
                    current.configs, current.nodes
                );
                Err(acked_violation(change, &why))
            }
        }
    }

    /// Members removed, by id and life, with the entry that removed each.
    pub fn removed(&self) -> &BTreeMap<(u64, u64), LogId<u64>> {
        &self.removed
    }

    /// How many membership entries were committed.
    pub fn entries_read(&self) -> u64 {
        self.entries_read
    }
}

fn acked_violation(change: &AckedChange, why: &str) -> Violation {
    Violation::new(
        "membership change acknowledged",
        format!(
            "{:?} of member {} was answered done at {} ms, but {why}",
            change.kind, change.id, change.at_ms
        ),
    )
}

/// Whether `next` may follow `before`: at most two voter sets, one of them `before`'s.
fn coherent(before: &MembershipSeen, next: &MembershipSeen) -> bool {
    next.configs.len() <= 2 && next.configs.iter().any(|voters| before.configs.contains(voters))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn seen(configs: &[&[u64]], learners: &[u64]) -> MembershipSeen {
        let configs: Vec<BTreeSet<u64>> =
            configs.iter().map(|voters| voters.iter().copied().collect()).collect();
        let mut nodes: BTreeSet<u64> = configs.iter().flatten().copied().collect();
        nodes.extend(learners);
        MembershipSeen { configs, nodes }
    }

    /// Only steps that keep one voter set in common with the configuration before are
    /// coherent.
    #[test]
    fn coherent_steps_share_a_voter_set() {
        let check = |before: MembershipSeen, next: MembershipSeen, expected: bool| {
            assert_eq!(coherent(&before, &next), expected, "{before:?} -> {next:?}");
        };
        check(seen(&[&[1, 2, 3]], &[]), seen(&[&[1, 2, 3]], &[4]), true);
        check(seen(&[&[1, 2, 3]], &[4]), seen(&[&[1, 2, 3], &[1, 2, 3, 4]], &[]), true);
        check(seen(&[&[1, 2, 3], &[1, 2, 3, 4]], &[]), seen(&[&[1, 2, 3, 4]], &[]), true);
        check(seen(&[&[1, 2, 3], &[1, 2]], &[]), seen(&[&[1, 2], &[1, 2, 5]], &[]), true);
        check(seen(&[&[1, 2, 3], &[1, 2]], &[]), seen(&[&[1, 2, 3]], &[]), true);
        check(seen(&[&[1, 2, 3]], &[]), seen(&[&[1, 2]], &[]), false);
        check(seen(&[&[1, 2, 3], &[1, 2]], &[]), seen(&[&[2, 3]], &[]), false);
        check(seen(&[&[1, 2]], &[]), seen(&[&[1, 3], &[1, 2, 3]], &[]), false);
    }
}
