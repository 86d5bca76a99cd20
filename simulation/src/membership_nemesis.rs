//! The membership nemesis (with `--membership`): through the fault phase, while the workload
//! and the other faults run, it plays the operator of `raftrain member`, calling the leader's
//! production `ConsensusNode` (`add_learner`, `promote`, `remove_member` with the simulated
//! handoff transport) one change at a time, following a leader that hands off before its own
//! removal. Its plans:
//! - replace: remove a voter (the leader half the time); the removed master runs on for a
//!   while, as a real one does until it learns of its removal, then its disk is wiped and it
//!   starts again with `--join`: added as a learner, caught up (log or snapshot), promoted;
//! - grow: one or two new masters (new ids, new addresses the network routes) join, are
//!   promoted, and are removed again and retired for good;
//! - remove a dead member: a voter that is down (crashed here if none is) is removed, then
//!   wiped and brought back as in a replace.
//!
//! Sometimes it crashes the leader just as it asks for a change, or the learner while it
//! catches up (both restarted a little later). A change answered as done is reported to the
//! checkers (`checker/membership.rs`). It draws from a random stream of its own, and without
//! the flag it does not exist, so no other seed's schedule moves. After the heal it starts no
//! new plan but finishes the one under way.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use consensus::{Members, MembershipError};
use tokio::task::JoinHandle;

use crate::checker::{AckedChange, MemberChangeKind};
use crate::cluster::Cluster;
use crate::config::SimulationConfig;
use crate::master_link::master_addr;
use crate::rng::SimRng;
use crate::trace::Trace;

/// The nemesis' random stream (far from every other component's).
pub const MEMBERSHIP_STREAM: u64 = 1 << 44;
/// A promotion waits this long for its learner to catch up (production allows 60 s; the
/// simulation's timings are about ten times shorter).
const PROMOTE_CATCH_UP_MS: u64 = 5_000;
/// A leader asked to remove itself hands off within this (as a graceful stop's).
const HAND_OFF_MS: u64 = 1_000;
/// Between the end of one plan and the start of the next.
const PLAN_GAP_MS: (u64, u64) = (200, 1_500);
/// A removed master runs on this long before it stops (a real one asks every 2 s).
const REMOVED_RUNS_MS: (u64, u64) = (50, 2_000);
/// Between a failed attempt and the next; how many attempts one step gets.
const RETRY_MS: (u64, u64) = (50, 300);
const ATTEMPTS_MAX: u32 = 60;
/// How often the leader is crashed as a change is asked, and a learner while it catches up.
const CRASH_LEADER_PERCENT: u64 = 15;
const CRASH_LEARNER_PERCENT: u64 = 25;
/// When such a crash comes after the ask, and how long the crashed node stays down.
const CRASH_AFTER_MS: (u64, u64) = (0, 300);
const DOWN_MS: (u64, u64) = (200, 1_500);

/// One step of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Ask the leader for this change.
    Change(MemberChangeKind, u64),
    /// The removed node's disk is wiped and it starts again, joining.
    Wipe(u64),
    /// The removed node stops for good.
    Retire(u64),
    /// A new node starts, joining.
    Start(u64),
    /// Crash this voter (if it runs) to remove it dead.
    Crash(u64),
}

/// The change under way: its step and the leader's answer to come.
struct Asked {
    step: Step,
    answer: JoinHandle<Result<Members, MembershipError>>,
}

/// Plans membership changes and carries them out one step at a time.
pub struct MembershipNemesis {
    rng: SimRng,
    trace: Trace,
    plan: VecDeque<Step>,
    asked: Option<Asked>,
    /// The next step waits until then (simulated ms).
    next_at_ms: u64,
    attempts: u32,
    next_new_id: u64,
    /// Crashes to come, and restarts of the nodes it crashed, by node (simulated ms).
    crash_at: BTreeMap<u64, u64>,
    restart_at: BTreeMap<u64, u64>,
    /// Changes answered as done since the checkers last looked.
    acks: Vec<AckedChange>,
    /// Whether it may start new plans (until the heal).
    planning: bool,
}

impl MembershipNemesis {
    /// A nemesis drawing from `rng`, for a group of founders `1..=node_count`.
    pub fn new(rng: SimRng, trace: Trace, node_count: u64) -> Self {
        Self {
            rng,
            trace,
            plan: VecDeque::new(),
            asked: None,
            next_at_ms: 0,
            attempts: 0,
            next_new_id: node_count + 1,
            crash_at: BTreeMap::new(),
            restart_at: BTreeMap::new(),
            acks: Vec::new(),
            planning: true,
        }
    }

    /// The nemesis of a run with `--membership` (none without).
    pub fn for_run(config: &SimulationConfig, trace: &Trace) -> Option<Self> {
        let rng = SimRng::derive(config.seed, MEMBERSHIP_STREAM);
        config.membership.then(|| Self::new(rng, trace.clone(), config.node_count))
    }

    /// The changes answered as done since the last call.
    pub fn take_acks(&mut self) -> Vec<AckedChange> {
        std::mem::take(&mut self.acks)
    }

    /// From the heal on: no new plan, and no more crashes (the one under way finishes).
    pub fn heal(&mut self) {
        self.planning = false;
        self.crash_at.clear();
    }

    /// Whether no plan is under way.
    pub fn idle(&self) -> bool {
        self.plan.is_empty() && self.asked.is_none()
    }

    /// Takes one turn: crashes and restarts that are due, the answer of the change under way,
    /// and the next step of the plan (or a new plan) when its time has come.
    pub async fn step(&mut self, cluster: &mut Cluster) -> anyhow::Result<()> {
        self.crashes_due(cluster).await?;
        if let Some(asked) = self.asked.take() {
            if !asked.answer.is_finished() {
                self.asked = Some(asked);
                return Ok(());
            }
            let answer = asked.answer.await?;
            self.answered(cluster, asked.step, answer);
        }
        if self.trace.now_ms() < self.next_at_ms {
            return Ok(());
        }
        let Some(step) = self.plan.front().copied() else {
            if self.planning {
                self.start_plan(cluster);
            }
            return Ok(());
        };
        match step {
            Step::Change(kind, id) => self.ask(cluster, kind, id),
            Step::Wipe(id) => {
                self.plan.pop_front();
                cluster.wipe(id).await?;
            }
            Step::Retire(id) => {
                self.plan.pop_front();
                cluster.retire(id);
            }
            Step::Start(id) => {
                self.plan.pop_front();
                cluster.add_node(id).await?;
            }
            Step::Crash(id) => {
                self.plan.pop_front();
                // It stays down until its removal wipes it (or the other faults restart it).
                cluster.crash(id);
            }
        }
        Ok(())
    }

    /// Draws the next plan from the voters the leader lists (none without a leader).
    fn start_plan(&mut self, cluster: &Cluster) {
        let Some(leader) = cluster.leader() else { return };
        let Ok(members) = leader.node.members() else { return };
        if members.joint {
            return;
        }
        let voters: Vec<u64> =
            members.members.iter().filter(|member| member.voter).map(|member| member.id).collect();
        let running: BTreeSet<u64> = cluster.running().iter().map(|node| node.id).collect();
        let roll = self.rng.range(0, 100);
        let (kind, plan) = match roll {
            0..=39 => {
                let victim = match self.rng.percent(50) {
                    true => leader.id,
                    false => voters[self.rng.index(voters.len())],
                };
                ("membership plan: replace a voter", replace(victim, false))
            }
            40..=69 => {
                let count = self.rng.range(1, 3);
                let first = self.next_new_id;
                self.next_new_id += count;
                ("membership plan: grow and shrink", grow(first..first + count))
            }
            _ => {
                let dead: Vec<u64> =
                    voters.iter().copied().filter(|id| !running.contains(id)).collect();
                let others: Vec<u64> =
                    voters.iter().copied().filter(|id| *id != leader.id).collect();
                let plan = match (dead.first(), others.is_empty()) {
                    (Some(victim), _) => replace(*victim, false),
                    (None, false) => replace(others[self.rng.index(others.len())], true),
                    (None, true) => return,
                };
                ("membership plan: remove a dead voter", plan)
            }
        };
        self.trace.tally(kind);
        self.trace.record(format!("membership nemesis plans {plan:?} (voters {voters:?})"));
        self.plan = plan.into();
        self.attempts = 0;
    }

    /// Asks the leader for one change, in a task of its own.
    fn ask(&mut self, cluster: &Cluster, kind: MemberChangeKind, id: u64) {
        let Some(leader) = cluster.leader() else {
            self.retry_later(kind, id, "no leader");
            return;
        };
        let node = leader.node.clone();
        let handoff = cluster.network().handoff(leader.id, leader.incarnation);
        let addr = master_addr(id);
        self.trace.record(format!("membership nemesis asks node {} for {kind:?} {id}", leader.id));
        let answer = tokio::spawn(async move {
            match kind {
                MemberChangeKind::AddLearner => node.add_learner(id, &addr).await,
                MemberChangeKind::Promote => {
                    node.promote(id, Duration::from_millis(PROMOTE_CATCH_UP_MS)).await
                }
                MemberChangeKind::Remove => {
                    node.remove_member(id, &handoff, Duration::from_millis(HAND_OFF_MS)).await
                }
            }
        });
        self.asked = Some(Asked { step: Step::Change(kind, id), answer });
        if self.planning && self.rng.percent(CRASH_LEADER_PERCENT) {
            let at_ms = self.trace.now_ms() + self.rng.range(CRASH_AFTER_MS.0, CRASH_AFTER_MS.1);
            self.trace.tally("leader crashed during a membership change");
            self.crash_at.insert(leader.id, at_ms);
        }
    }

    /// What the leader answered to `step`.
    fn answered(
        &mut self,
        cluster: &Cluster,
        step: Step,
        answer: Result<Members, MembershipError>,
    ) {
        let Step::Change(kind, id) = step else { return };
        let now_ms = self.trace.now_ms();
        match answer {
            Ok(members) => {
                let voters: Vec<u64> =
                    members.members.iter().filter(|row| row.voter).map(|row| row.id).collect();
                self.trace.record(format!("membership {kind:?} {id} done: voters {voters:?}"));
                self.trace.tally(match kind {
                    MemberChangeKind::AddLearner => "member added as a learner",
                    MemberChangeKind::Promote => "learner promoted",
                    MemberChangeKind::Remove => "member removed",
                });
                self.acks.push(AckedChange { kind, id, at_ms: now_ms });
                self.done(kind, id);
            }
            Err(MembershipError::HandedOff { to, .. }) => {
                self.trace.record(format!("membership {kind:?} {id}: handed off to {to}"));
                self.trace.tally("leader handed off before its removal");
                self.next_at_ms = now_ms;
            }
            Err(MembershipError::NotMember { .. })
                if kind == MemberChangeKind::Remove && removal_applied(cluster, id) =>
            {
                // An earlier attempt timed out and committed after all.
                self.trace.record(format!("membership Remove {id}: already removed"));
                self.done(kind, id);
            }
            Err(error) => self.retry_later(kind, id, &error.to_string()),
        }
    }

    /// Step `kind` of `id` is done: the next one waits as the plan says.
    fn done(&mut self, kind: MemberChangeKind, id: u64) {
        self.plan.pop_front();
        self.attempts = 0;
        let now_ms = self.trace.now_ms();
        let wait_ms = match kind {
            MemberChangeKind::Remove => self.rng.range(REMOVED_RUNS_MS.0, REMOVED_RUNS_MS.1),
            MemberChangeKind::AddLearner => {
                if self.planning && self.rng.percent(CRASH_LEARNER_PERCENT) {
                    let after_ms = self.rng.range(CRASH_AFTER_MS.0, CRASH_AFTER_MS.1);
                    self.trace.tally("learner crashed while catching up");
                    self.crash_at.insert(id, now_ms + after_ms);
                }
                0
            }
            MemberChangeKind::Promote => 0,
        };
        self.next_at_ms = now_ms + wait_ms;
        if self.plan.is_empty() {
            self.next_at_ms += self.rng.range(PLAN_GAP_MS.0, PLAN_GAP_MS.1);
        }
    }

    /// A failed attempt: tries again a little later, or gives the plan up after too many.
    fn retry_later(&mut self, kind: MemberChangeKind, id: u64, why: &str) {
        self.attempts += 1;
        self.trace
            .record(format!("membership {kind:?} {id} failed ({why}), attempt {}", self.attempts));
        let now_ms = self.trace.now_ms();
        if self.attempts >= ATTEMPTS_MAX {
            self.trace.record(format!("membership nemesis gives up its plan {:?}", self.plan));
            self.trace.tally("membership plan given up");
            self.plan.clear();
            self.attempts = 0;
        }
        self.next_at_ms = now_ms + self.rng.range(RETRY_MS.0, RETRY_MS.1);
    }

    /// Crashes the nodes whose crash is due, and restarts those whose downtime is over.
    async fn crashes_due(&mut self, cluster: &mut Cluster) -> anyhow::Result<()> {
        let now_ms = self.trace.now_ms();
        let due = |at: &BTreeMap<u64, u64>| -> Vec<u64> {
            at.iter().filter(|(_, at_ms)| **at_ms <= now_ms).map(|(id, _)| *id).collect()
        };
        for id in due(&self.crash_at) {
            self.crash_at.remove(&id);
            self.trace.record(format!("membership nemesis crashes node {id}"));
            cluster.crash(id);
            self.restart_later(id);
        }
        for id in due(&self.restart_at) {
            self.restart_at.remove(&id);
            if cluster.crashed().contains(&id) {
                cluster.start_node(id).await?;
            }
        }
        Ok(())
    }

    fn restart_later(&mut self, id: u64) {
        let at_ms = self.trace.now_ms() + self.rng.range(DOWN_MS.0, DOWN_MS.1);
        self.restart_at.insert(id, at_ms);
    }
}

/// Replaces `victim`: removed (crashed first if `crash_first`), wiped, added back, promoted.
fn replace(victim: u64, crash_first: bool) -> Vec<Step> {
    let crash = crash_first.then_some(Step::Crash(victim));
    let steps = [
        Step::Change(MemberChangeKind::Remove, victim),
        Step::Wipe(victim),
        Step::Change(MemberChangeKind::AddLearner, victim),
        Step::Change(MemberChangeKind::Promote, victim),
    ];
    crash.into_iter().chain(steps).collect()
}

/// Grows the group by the new ids `ids`, then removes and retires them again.
fn grow(ids: std::ops::Range<u64>) -> Vec<Step> {
    let join = ids.clone().flat_map(|id| {
        [
            Step::Start(id),
            Step::Change(MemberChangeKind::AddLearner, id),
            Step::Change(MemberChangeKind::Promote, id),
        ]
    });
    let leave = ids.flat_map(|id| [Step::Change(MemberChangeKind::Remove, id), Step::Retire(id)]);
    join.chain(leave).collect()
}

/// Whether the leader's applied (committed) membership no longer lists `id`.
fn removal_applied(cluster: &Cluster, id: u64) -> bool {
    let Some(leader) = cluster.leader() else { return false };
    !leader.node.applied_membership().1.contains(&id)
}
