//! The membership nemesis: one fault takes a voter out of the group and brings it back. It
//! removes the voter (`member remove`; the leader, when it is the one, hands off first),
//! waits for it to exit by itself and leave its `REMOVED` marker, wipes its data directory,
//! starts it again with `--join` (same id, same addresses, so its proxies stay valid) and
//! waits until the leader lists it a voter again with no change half done. Each fault of a
//! run follows the next [`Plan`] of a fixed rotation, so a short run sees every twist: a
//! leader killed (-9) in the middle of the removal or of the promotion, a learner killed
//! during its catch-up, a joiner removed again as soon as it is listed (while it may still be
//! asking to join: it must stop as removed, never be added back). Every step is recorded under [`MEMBERSHIP_PROCESS`], one after
//! another (never two open at once): `Ok`, `Info` when an answer was lost to a fault, `Fail`
//! when the group broke a promise (the `membership` checker's finding).

use std::time::{Duration, Instant};

use client::{MasterClient, MemberChange, Membership};
use rand::rngs::StdRng;
use rand::Rng as _;

use crate::cluster::{Cluster, MASTER_COUNT, REJOIN_WAIT_MS_MAX};
use crate::history::{History, OpKind, Operation, Phase, Value, MEMBERSHIP_PROCESS};

/// The fault's name (`--nemesis membership`).
pub const FAULT_NAME: &str = "membership";
/// A removal must be committed (the member gone, no change half done) within this long.
const REMOVE_WAIT_MS_MAX: u64 = 30_000;
/// A removed master must notice and exit within this long (it asks every 2 s).
const STOP_WAIT_MS_MAX: u64 = 30_000;
/// A restarted joiner must be listed (learner or voter) within this long.
const LISTED_WAIT_MS_MAX: u64 = 30_000;
/// How long a master killed in the middle of a change stays down.
const KILLED_DOWN_MS: u64 = 1_000;
/// The leader is killed this long (drawn) after the removal is asked for: a removal's two
/// commits (joint, then uniform) take some tens of ms on a loaded machine.
const KILL_IN_REMOVAL_MS: (u64, u64) = (0, 40);
/// The leader is killed this long (drawn) after the joiner is first listed as a learner: its
/// promotion waits for the catch-up, then commits twice.
const KILL_IN_PROMOTION_MS: (u64, u64) = (0, 300);
/// How often the membership is read while waiting.
const POLL_MS: u64 = 100;
/// How often a learner's role is read while waiting to kill it during its catch-up.
const LEARNER_POLL_MS: u64 = 20;

/// Which voter leaves and what else happens while it leaves and comes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The leader leaves (it hands leadership off first), else a follower.
    pub leader_leaves: bool,
    pub twist: Twist,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Twist {
    None,
    /// kill -9 the leader while the removal is under way, restart it after a second.
    KillLeaderDuringRemove,
    /// kill -9 the joiner while it is a learner catching up, restart it (its data kept).
    KillLearner,
    /// kill -9 the leader once the joiner is listed (the promotion under way).
    KillLeaderDuringJoin,
    /// `member remove` the joiner as soon as it is listed (usually a learner still asking to
    /// join); once it stopped as removed, wipe it and let it join again.
    RemoveJoiner,
}

impl Plan {
    /// How the fault went, for the report's fault counts.
    pub fn name(self) -> &'static str {
        match (self.leader_leaves, self.twist) {
            (false, Twist::None) => "a follower leaves",
            (true, Twist::None) => "the leader leaves",
            (false, Twist::KillLeaderDuringRemove) => "leader killed mid-removal",
            (true, Twist::KillLeaderDuringRemove) => "the leader leaves, killed mid-removal",
            (false, Twist::KillLearner) => "learner killed in catch-up",
            (true, Twist::KillLearner) => "the leader leaves, learner killed in catch-up",
            (_, Twist::KillLeaderDuringJoin) => "leader killed mid-promotion",
            (_, Twist::RemoveJoiner) => "joiner removed while it joins",
        }
    }
}

/// The rotation of plans, one per fault in order.
const PLANS: [Plan; 6] = [
    Plan { leader_leaves: false, twist: Twist::None },
    Plan { leader_leaves: true, twist: Twist::None },
    Plan { leader_leaves: false, twist: Twist::KillLeaderDuringRemove },
    Plan { leader_leaves: true, twist: Twist::KillLearner },
    Plan { leader_leaves: false, twist: Twist::KillLeaderDuringJoin },
    Plan { leader_leaves: false, twist: Twist::RemoveJoiner },
];

/// The plan of the next membership fault: the rotation's entry after those already healed.
pub fn next_plan(history: &History) -> Plan {
    let healed = history
        .ops()
        .iter()
        .filter(|op| {
            matches!(&op.f, Operation::Nemesis { fault, phase: Phase::Stop, .. } if fault == FAULT_NAME)
        })
        .count();
    PLANS[healed % PLANS.len()]
}

/// One step being recorded: its invocation is in the history, its completion comes next.
struct Recorded<'a> {
    history: &'a History,
    f: Operation,
    started: Instant,
}

impl<'a> Recorded<'a> {
    fn begin(history: &'a History, step: &str, index: usize) -> Self {
        let f = Operation::MemberChange { step: step.to_string(), master: index as u64 + 1 };
        history.record(MEMBERSHIP_PROCESS, OpKind::Invoke, f.clone(), Value::None);
        Self { history, f, started: Instant::now() }
    }

    fn end(self, kind: OpKind, outcome: String) {
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
        tracing::info!(step = ?self.f, ?kind, outcome, elapsed_ms, "nemesis: membership");
        let value = Value::Changed { elapsed_ms, outcome };
        self.history.record(MEMBERSHIP_PROCESS, kind, self.f, value);
    }
}

/// Takes master `victim` out of the group and brings it back as [`Plan`] says. Only harness
/// errors are returned; what the group did wrong is recorded as `Fail` steps.
pub async fn cycle(
    cluster: &mut Cluster,
    victim: usize,
    plan: Plan,
    history: &History,
    rng: &mut StdRng,
) -> anyhow::Result<()> {
    let client = cluster.client(Duration::from_millis(REMOVE_WAIT_MS_MAX))?;
    if !is_whole(&client, victim, history).await {
        return Ok(());
    }
    if !take_out_and_rejoin(cluster, &client, victim, plan, history, rng).await? {
        return Ok(());
    }
    if let Some(voter) = wait_listed(&client, victim, history, plan.twist).await {
        match plan.twist {
            Twist::KillLearner => kill_learner(cluster, victim, voter, history).await?,
            Twist::KillLeaderDuringJoin => {
                kill_leader(cluster, rng, history, victim).await?;
            }
            Twist::RemoveJoiner => remove_joiner(cluster, &client, victim, history, rng).await?,
            Twist::None | Twist::KillLeaderDuringRemove => {}
        }
    }
    wait_voter(&client, victim, history).await;
    cluster.record_exits(history);
    Ok(())
}

/// Whether the leader lists every master as a voter, nothing else, and no change half done
/// (waiting up to [`LISTED_WAIT_MS_MAX`] for it): a fault starts only from a whole group, so
/// that an earlier failure does not compound (a second removal beside a member that never
/// came back would leave one voter). When not, a `skip` step says why.
async fn is_whole(client: &MasterClient, victim: usize, history: &History) -> bool {
    let all: Vec<u64> = (1..=MASTER_COUNT as u64).collect();
    let deadline = Instant::now() + Duration::from_millis(LISTED_WAIT_MS_MAX);
    let mut last = String::from("no leader answered");
    while Instant::now() < deadline {
        if let Ok(members) = client.members().await {
            let ids: Vec<u64> = members.members.iter().map(|member| member.id).collect();
            let voters = members.members.iter().all(|member| member.voter);
            if ids == all && voters && !members.joint {
                return true;
            }
            last = describe(&members);
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    let step = Recorded::begin(history, "skip", victim);
    step.end(OpKind::Info, format!("the group is not whole: {last}"));
    false
}

/// Asks for the removal of `victim`, with the leader killed in the middle if planned (and
/// started again [`KILLED_DOWN_MS`] after, unless it was the victim: a joint configuration
/// of old and new voters needs it back to commit).
async fn remove(
    cluster: &mut Cluster,
    client: &MasterClient,
    victim: usize,
    plan: Plan,
    history: &History,
    rng: &mut StdRng,
) -> anyhow::Result<()> {
    let step = Recorded::begin(history, "remove", victim);
    let change = MemberChange::Remove { id: victim as u64 + 1 };
    let (answer, killed) = match plan.twist {
        Twist::KillLeaderDuringRemove => {
            let (low, high) = KILL_IN_REMOVAL_MS;
            let delay = Duration::from_millis(rng.gen_range(low..=high));
            // The killed leader comes back while the removal waits: a joint configuration
            // of old and new voters may need it to commit anything.
            let kill = async {
                tokio::time::sleep(delay).await;
                let leader = cluster.leader().await?;
                cluster.kill_master(leader);
                tokio::time::sleep(Duration::from_millis(KILLED_DOWN_MS)).await;
                let restarted = leader != victim && cluster.restart_master(leader).is_ok();
                Some((leader, delay, restarted))
            };
            tokio::join!(client.change_member(&change), kill)
        }
        _ => (client.change_member(&change).await, None),
    };
    match answer {
        Ok(members) => step.end(OpKind::Ok, format!("removed; {}", describe(&members))),
        Err(error) => step.end(OpKind::Info, format!("outcome unknown: {error}")),
    }
    let Some((leader, delay, restarted)) = killed else { return Ok(()) };
    let step = Recorded::begin(history, "kill-leader", leader);
    cluster.record_exits(history);
    let outcome = format!("killed {} ms into the removal", delay.as_millis());
    match (leader == victim, restarted) {
        (true, _) => step.end(OpKind::Ok, format!("{outcome}: the leaving leader, left down")),
        (false, true) => step.end(OpKind::Ok, format!("{outcome}, up {KILLED_DOWN_MS} ms after")),
        (false, false) => anyhow::bail!("master-{} could not be started again", leader + 1),
    }
    Ok(())
}

/// Waits until the leader no longer lists `victim` and no change is half done, asking for
/// the removal again while it is still listed (a change cut short by a leader's death is
/// left half done until asked again). Whether it was removed within the bound.
async fn ensure_removed(client: &MasterClient, victim: usize, history: &History) -> bool {
    let step = Recorded::begin(history, "removed", victim);
    let id = victim as u64 + 1;
    let deadline = Instant::now() + Duration::from_millis(REMOVE_WAIT_MS_MAX);
    let mut last = String::from("no leader answered");
    let mut asked_again = 0;
    while Instant::now() < deadline {
        if let Ok(members) = client.members().await {
            last = describe(&members);
            let listed = members.members.iter().any(|member| member.id == id);
            if !listed && !members.joint {
                step.end(OpKind::Ok, format!("{last}; asked again {asked_again} times"));
                return true;
            }
            if listed && !members.joint {
                asked_again += 1;
                let _ = client.change_member(&MemberChange::Remove { id }).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    step.end(OpKind::Fail, format!("still a member {REMOVE_WAIT_MS_MAX} ms on: {last}"));
    false
}

/// Waits for removed `victim` to exit by itself and leave its `REMOVED` marker (if it was
/// running); one that does neither within the bound is killed.
async fn wait_stopped(cluster: &mut Cluster, victim: usize, history: &History) {
    if !cluster.is_master_running(victim) {
        return;
    }
    let step = Recorded::begin(history, "stop", victim);
    let exited = cluster.wait_master_exit(victim, Duration::from_millis(STOP_WAIT_MS_MAX)).await;
    cluster.record_exits(history);
    let marker = cluster.dir().join(format!("master-{}", victim + 1)).join("REMOVED");
    match (exited, marker.is_file()) {
        (true, true) => step.end(OpKind::Ok, "exited, REMOVED marker left".to_string()),
        (true, false) => step.end(OpKind::Fail, "exited without a REMOVED marker".to_string()),
        (false, _) => {
            cluster.kill_master(victim);
            cluster.record_exits(history);
            let outcome = format!("still running {STOP_WAIT_MS_MAX} ms after its removal");
            step.end(OpKind::Fail, outcome);
        }
    }
}

/// Waits until the leader lists the restarted joiner (learner or voter). With a learner to
/// kill, reads fast so as to see it while it is one. Whether it was listed a voter (`None`:
/// not listed within the bound).
async fn wait_listed(
    client: &MasterClient,
    victim: usize,
    history: &History,
    twist: Twist,
) -> Option<bool> {
    let step = Recorded::begin(history, "join", victim);
    let fast = matches!(twist, Twist::KillLearner | Twist::RemoveJoiner);
    let poll_ms = if fast { LEARNER_POLL_MS } else { POLL_MS };
    let deadline = Instant::now() + Duration::from_millis(LISTED_WAIT_MS_MAX);
    while Instant::now() < deadline {
        if let Ok(members) = client.members().await {
            let row = members.members.iter().find(|member| member.id == victim as u64 + 1);
            if let Some(row) = row {
                let role = if row.voter { "a voter" } else { "a learner" };
                step.end(OpKind::Ok, format!("listed as {role}; {}", describe(&members)));
                return Some(row.voter);
            }
        }
        tokio::time::sleep(Duration::from_millis(poll_ms)).await;
    }
    step.end(OpKind::Fail, format!("not listed within {LISTED_WAIT_MS_MAX} ms"));
    None
}

/// kill -9 the joiner during its catch-up (unless it was promoted before it was seen as a
/// learner), then start it again on what it had.
async fn kill_learner(
    cluster: &mut Cluster,
    victim: usize,
    voter: bool,
    history: &History,
) -> anyhow::Result<()> {
    let step = Recorded::begin(history, "kill-learner", victim);
    cluster.kill_master(victim);
    cluster.record_exits(history);
    tokio::time::sleep(Duration::from_millis(KILLED_DOWN_MS)).await;
    cluster.restart_master(victim)?;
    let when = if voter { "already promoted: " } else { "" };
    step.end(OpKind::Ok, format!("{when}killed, restarted after {KILLED_DOWN_MS} ms"));
    Ok(())
}

/// Removes the joiner as soon as it is listed, then, once the removal committed and the joiner
/// stopped as removed (`wait_stopped` records a `Fail` if it kept running: asked to be added
/// back), wipes it and lets it join again.
async fn remove_joiner(
    cluster: &mut Cluster,
    client: &MasterClient,
    victim: usize,
    history: &History,
    rng: &mut StdRng,
) -> anyhow::Result<()> {
    let plan = Plan { leader_leaves: false, twist: Twist::None };
    if take_out_and_rejoin(cluster, client, victim, plan, history, rng).await? {
        wait_listed(client, victim, history, Twist::None).await;
    }
    Ok(())
}

/// Removes `victim` as `plan` says, waits for it to stop as removed, wipes it and starts it
/// again with `--join`; whether it was (false: the removal never committed, and the master,
/// still a member with the group's log, just runs again unwiped).
async fn take_out_and_rejoin(
    cluster: &mut Cluster,
    client: &MasterClient,
    victim: usize,
    plan: Plan,
    history: &History,
    rng: &mut StdRng,
) -> anyhow::Result<bool> {
    remove(cluster, client, victim, plan, history, rng).await?;
    if !ensure_removed(client, victim, history).await {
        if !cluster.is_master_running(victim) {
            cluster.restart_master(victim)?;
        }
        return Ok(false);
    }
    wait_stopped(cluster, victim, history).await;
    cluster.wipe_to_join(victim)?;
    cluster.restart_master(victim)?;
    Ok(true)
}

/// kill -9 the leader (after a drawn delay), start it again after [`KILLED_DOWN_MS`].
async fn kill_leader(
    cluster: &mut Cluster,
    rng: &mut StdRng,
    history: &History,
    victim: usize,
) -> anyhow::Result<()> {
    let delay = rng.gen_range(KILL_IN_PROMOTION_MS.0..=KILL_IN_PROMOTION_MS.1);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    let Some(leader) = cluster.leader().await else { return Ok(()) };
    let step = Recorded::begin(history, "kill-leader", leader);
    cluster.kill_master(leader);
    cluster.record_exits(history);
    tokio::time::sleep(Duration::from_millis(KILLED_DOWN_MS)).await;
    cluster.restart_master(leader)?;
    let whose = if leader == victim { "the joiner itself leads: " } else { "" };
    step.end(OpKind::Ok, format!("{whose}killed {delay} ms after the joiner was listed"));
    Ok(())
}

/// Waits until the leader lists `victim` as a voter with no change half done.
async fn wait_voter(client: &MasterClient, victim: usize, history: &History) {
    let step = Recorded::begin(history, "voter", victim);
    let id = victim as u64 + 1;
    let deadline = Instant::now() + Duration::from_millis(REJOIN_WAIT_MS_MAX);
    let mut last = String::from("no leader answered");
    while Instant::now() < deadline {
        if let Ok(members) = client.members().await {
            last = describe(&members);
            let voter = members.members.iter().any(|member| member.id == id && member.voter);
            if voter && !members.joint {
                step.end(OpKind::Ok, format!("a voter again; {last}"));
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    step.end(OpKind::Fail, format!("not a voter {REJOIN_WAIT_MS_MAX} ms on: {last}"));
}

/// `leader 2, voters [1, 2], learners [3] (joint)`.
fn describe(members: &Membership) -> String {
    let ids = |voter: bool| -> Vec<u64> {
        let rows = members.members.iter().filter(|member| member.voter == voter);
        rows.map(|member| member.id).collect()
    };
    let joint = if members.joint { " (joint)" } else { "" };
    format!(
        "leader {}, voters {:?}, learners {:?}{joint}",
        members.leader_id,
        ids(true),
        ids(false)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plans follow the rotation by faults already healed, so a short run sees each one
    /// and a seed replays them; each has its own name in the report.
    #[test]
    fn plans_rotate_by_the_faults_healed() {
        let history = History::new();
        let mut seen = Vec::new();
        for _ in 0..PLANS.len() + 1 {
            let plan = next_plan(&history);
            seen.push(plan);
            let f = Operation::Nemesis {
                fault: FAULT_NAME.into(),
                targets: vec![0],
                phase: Phase::Stop,
            };
            history.record(crate::history::NEMESIS_PROCESS, OpKind::Info, f, Value::None);
        }
        assert_eq!(seen[..PLANS.len()], PLANS);
        assert_eq!(seen[PLANS.len()], PLANS[0]);
        let mut names: Vec<&str> = PLANS.iter().map(|plan| plan.name()).collect();
        names.dedup();
        assert_eq!(names.len(), PLANS.len());
    }
}
