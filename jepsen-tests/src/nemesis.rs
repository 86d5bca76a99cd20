//! Nemeses: the faults the harness injects, a seeded schedule of them, and applying and
//! healing each against a [`Cluster`]. Every fault is started, held for its window, then
//! healed; the next one starts after a quiet interval, so each heal can be judged on its own.
//! Besides kills, pauses and partitions, the everyday faults of a cluster: graceful restarts
//! (SIGTERM, as Kubernetes, systemd and `docker stop` send), a rolling restart, a majority
//! down for longer than every client's deadline, half-open links, a trainer whose view of
//! its data breaks, and a member taken out of the group and brought back (`membership.rs`).

pub mod membership;

use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom as _;
use rand::{Rng as _, SeedableRng as _};
use serde::{Deserialize, Serialize};

use crate::cluster::{Cluster, MASTER_COUNT};
use crate::history::History;

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// kill -9 the leader, restart it when healed.
    KillLeader,
    /// kill -9 a follower, restart it when healed.
    KillFollower,
    /// kill -9 every master at once, restart them all when healed.
    KillAll,
    /// SIGSTOP the leader for longer than an election timeout, SIGCONT when healed.
    PauseLeader,
    /// SIGSTOP a follower, SIGCONT when healed.
    PauseFollower,
    /// Cut every link between the leader and the others.
    IsolateLeader,
    /// Cut one random master from the other two.
    SplitOneTwo,
    /// A-B and B-C stay, A-C is cut (B bridges).
    Bridge,
    /// Cut random single links, one after another, through the window (with `--netns`: slow
    /// random masters' links with delay and loss instead).
    Clog,
    /// kill -9 a pserver (a standby takes its slot), restart it when healed.
    KillPserver,
    /// SIGSTOP a pserver past its lease, SIGCONT when healed (it exits if replaced).
    PausePserver,
    /// kill -9 a trainer process, start it again when healed (training workload).
    KillTrainer,
    /// SIGSTOP a trainer past its lease, SIGCONT when healed (training workload).
    PauseTrainer,
    /// SIGTERM the leader, wait for its exit (bounded), start it again at once.
    RestartLeader,
    /// SIGTERM a follower, wait for its exit (bounded), start it again at once.
    RestartFollower,
    /// Each master in turn: SIGTERM, wait for its exit, start it again, wait until it is back
    /// in the group, then the next.
    RollingRestart,
    /// kill -9 two masters for [`MAJORITY_OUTAGE_MS`], longer than every client's deadline,
    /// then start them again.
    MajorityOutage,
    /// The leader's links stop carrying packets without a reset (half-open connections).
    HalfOpen,
    /// Mid-run, in one trainer's own mount namespace, a truncated copy of its dataset is
    /// mounted over the file; unmounted (or the trainer restarted, if it stopped) when healed
    /// (training workload; root, `unshare` and `nsenter` only).
    BreakTrainerData,
    /// `member remove` a voter (sometimes the leader), wait for it to stop, wipe its data,
    /// start it with `--join` until it is a voter again; sometimes with the leader killed
    /// mid-change or the learner killed during its catch-up ([`membership::Plan`]).
    Membership,
}

impl Fault {
    /// The faults of the training workload's trainer processes.
    pub const TRAINER: [Fault; 3] =
        [Fault::KillTrainer, Fault::PauseTrainer, Fault::BreakTrainerData];

    /// Every fault but the trainer processes' (the task-queue workload has none).
    pub const ALL: [Fault; 17] = [
        Fault::KillLeader,
        Fault::KillFollower,
        Fault::KillAll,
        Fault::PauseLeader,
        Fault::PauseFollower,
        Fault::IsolateLeader,
        Fault::SplitOneTwo,
        Fault::Bridge,
        Fault::Clog,
        Fault::KillPserver,
        Fault::PausePserver,
        Fault::RestartLeader,
        Fault::RestartFollower,
        Fault::RollingRestart,
        Fault::MajorityOutage,
        Fault::HalfOpen,
        Fault::Membership,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::KillLeader => "kill-leader",
            Fault::KillFollower => "kill-follower",
            Fault::KillAll => "kill-all",
            Fault::PauseLeader => "pause-leader",
            Fault::PauseFollower => "pause-follower",
            Fault::IsolateLeader => "isolate-leader",
            Fault::SplitOneTwo => "split-one-two",
            Fault::Bridge => "bridge",
            Fault::Clog => "clog",
            Fault::KillPserver => "kill-pserver",
            Fault::PausePserver => "pause-pserver",
            Fault::KillTrainer => "kill-trainer",
            Fault::PauseTrainer => "pause-trainer",
            Fault::RestartLeader => "restart-leader",
            Fault::RestartFollower => "restart-follower",
            Fault::RollingRestart => "rolling-restart",
            Fault::MajorityOutage => "majority-outage",
            Fault::HalfOpen => "half-open",
            Fault::BreakTrainerData => "break-trainer-data",
            Fault::Membership => membership::FAULT_NAME,
        }
    }

    /// The window of a fault whose length is part of what it tests (instead of a drawn one).
    fn fixed_hold_ms(self) -> Option<u64> {
        match self {
            Fault::MajorityOutage => Some(MAJORITY_OUTAGE_MS),
            Fault::RollingRestart => Some(ROLLING_RESTART_MS),
            _ => None,
        }
    }

    /// Whether this machine can inject the fault; when not, why (printed once, and the fault
    /// is left out of the schedule).
    pub fn unavailable(self) -> Option<&'static str> {
        let can_break = || {
            let root = nix::unistd::geteuid().is_root();
            let runs = |program: &str| {
                std::process::Command::new(program)
                    .arg("--version")
                    .stdout(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|status| status.success())
            };
            root && runs("unshare") && runs("nsenter")
        };
        match self {
            Fault::BreakTrainerData if !can_break() => Some("needs root and unshare"),
            _ => None,
        }
    }
}

/// A majority outage: longer than every client's deadline (the harness's own clients wait at
/// most 60 s, trainers 30 s, task-queue clients 4 s), so every waiting caller gives up or
/// must wait it out.
pub const MAJORITY_OUTAGE_MS: u64 = 60_000;
/// The window of a rolling restart: three graceful stops, restarts and rejoins in a row (it
/// takes what it takes; a longer one only delays the next fault).
const ROLLING_RESTART_MS: u64 = 20_000;

/// One scheduled fault: when it starts (from the run's start) and how long it is held.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Step {
    pub fault: Fault,
    pub start_ms: u64,
    pub hold_ms: u64,
}

/// A run's faults in order; the same seed and arguments give the same schedule.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Schedule {
    pub seed: u64,
    pub steps: Vec<Step>,
}

/// A quiet interval before each fault: the cluster settles, clients make progress.
const QUIET_MS: (u64, u64) = (2_000, 4_000);
/// How long a fault is held: longer than the masters' election timeout (800 ms) and the
/// pservers' and trainers' leases in the harness (2 s).
const HOLD_MS: (u64, u64) = (2_500, 5_000);

impl Schedule {
    /// Faults drawn from `faults` with seeded timings until `total_ms` is used up.
    pub fn generate(seed: u64, faults: &[Fault], total_ms: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut steps = Vec::new();
        let mut now_ms = 0;
        loop {
            let start_ms = now_ms + rng.gen_range(QUIET_MS.0..=QUIET_MS.1);
            let hold_ms = rng.gen_range(HOLD_MS.0..=HOLD_MS.1);
            if start_ms + hold_ms > total_ms || faults.is_empty() {
                break;
            }
            // Drawn after the fit check, as before there were fixed windows, so that older
            // seeds of the older faults replay the same schedule.
            let fault = *faults.choose(&mut rng).expect("faults is not empty");
            let hold_ms = fault.fixed_hold_ms().unwrap_or(hold_ms);
            if start_ms + hold_ms > total_ms {
                break;
            }
            steps.push(Step { fault, start_ms, hold_ms });
            now_ms = start_ms + hold_ms;
        }
        Self { seed, steps }
    }

    /// The smoke schedule: a leader kill, a partition, a leader pause, a pserver kill and a
    /// graceful leader restart (SIGTERM), in that order, with fixed timings.
    pub fn smoke(seed: u64) -> Self {
        let faults = [
            Fault::KillLeader,
            Fault::IsolateLeader,
            Fault::PauseLeader,
            Fault::KillPserver,
            Fault::RestartLeader,
        ];
        Self::fixed(seed, &faults)
    }

    /// `faults` in order, one every 7 s from 3 s, each held 3 s.
    pub fn fixed(seed: u64, faults: &[Fault]) -> Self {
        let steps = faults
            .iter()
            .enumerate()
            .map(|(index, fault)| Step {
                fault: *fault,
                start_ms: 3_000 + index as u64 * 7_000,
                hold_ms: 3_000,
            })
            .collect();
        Self { seed, steps }
    }

    /// When the last fault is healed.
    pub fn end_ms(&self) -> u64 {
        self.steps.last().map_or(0, |step| step.start_ms + step.hold_ms)
    }
}

/// A fault in force: what to undo at the heal.
#[derive(Debug)]
pub struct Active {
    pub fault: Fault,
    /// The masters (or, for pserver and trainer faults, pservers or trainers) it hit, by
    /// index.
    pub targets: Vec<usize>,
    /// How it was injected, when there is more than one way (`half-open`: `proxy-stall` or
    /// `netns-pfifo-drop`).
    pub how: Option<&'static str>,
}

/// The targets of `fault` against `cluster` now; `rng` picks among candidates (a membership
/// fault's plan, the next of its rotation, says whether the leader leaves).
pub async fn targets(
    cluster: &Cluster,
    fault: Fault,
    rng: &mut StdRng,
    history: &History,
) -> anyhow::Result<Vec<usize>> {
    let leader = cluster.leader().await;
    let follower = |rng: &mut StdRng| {
        let others: Vec<usize> = (0..MASTER_COUNT).filter(|index| Some(*index) != leader).collect();
        *others.choose(rng).expect("three masters")
    };
    let targets = match fault {
        Fault::KillLeader
        | Fault::PauseLeader
        | Fault::IsolateLeader
        | Fault::RestartLeader
        | Fault::HalfOpen => {
            vec![leader.unwrap_or_else(|| rng.gen_range(0..MASTER_COUNT))]
        }
        Fault::KillFollower | Fault::PauseFollower | Fault::RestartFollower => vec![follower(rng)],
        Fault::Membership => match (membership::next_plan(history).leader_leaves, leader) {
            (true, Some(leader)) => vec![leader],
            _ => vec![follower(rng)],
        },
        Fault::KillAll | Fault::RollingRestart => (0..MASTER_COUNT).collect(),
        Fault::MajorityOutage => {
            let mut two = rand::seq::index::sample(rng, MASTER_COUNT, 2).into_vec();
            two.sort_unstable();
            two
        }
        Fault::SplitOneTwo | Fault::Bridge | Fault::Clog => vec![rng.gen_range(0..MASTER_COUNT)],
        Fault::KillPserver | Fault::PausePserver => vec![rng.gen_range(0..cluster.pservers.len())],
        Fault::KillTrainer | Fault::PauseTrainer | Fault::BreakTrainerData => {
            anyhow::ensure!(
                !cluster.trainers.is_empty(),
                "{} needs trainer processes",
                fault.name()
            );
            vec![rng.gen_range(0..cluster.trainers.len())]
        }
    };
    Ok(targets)
}

/// Starts `fault` against `targets`; graceful restarts and membership changes happen here in
/// full (they record the exits, rejoins and changes they cause in `history`). What was done,
/// for the log.
pub async fn apply(
    cluster: &mut Cluster,
    fault: Fault,
    targets: &[usize],
    history: &History,
    rng: &mut StdRng,
) -> anyhow::Result<Active> {
    let mut how = None;
    match fault {
        Fault::KillLeader | Fault::KillFollower | Fault::KillAll | Fault::MajorityOutage => {
            targets.iter().for_each(|index| cluster.kill_master(*index));
        }
        Fault::RestartLeader | Fault::RestartFollower | Fault::RollingRestart => {
            for index in targets {
                restart_gracefully(cluster, *index, history).await?;
            }
        }
        Fault::Membership => {
            let plan = membership::next_plan(history);
            membership::cycle(cluster, targets[0], plan, history, rng).await?;
            how = Some(plan.name());
        }
        Fault::PauseLeader | Fault::PauseFollower => cluster.pause_master(targets[0])?,
        Fault::IsolateLeader | Fault::SplitOneTwo => cluster.isolate(targets)?,
        Fault::Bridge => {
            let bridge = targets[0];
            let (a, c) = ((bridge + 1) % MASTER_COUNT, (bridge + 2) % MASTER_COUNT);
            cluster.cut(a, c)?;
            cluster.cut(c, a)?;
        }
        Fault::Clog => cluster.clog(targets[0])?,
        Fault::HalfOpen => how = Some(cluster.half_open(targets[0])?),
        Fault::KillPserver => cluster.kill_pserver(targets[0]),
        Fault::PausePserver => cluster.pause_pserver(targets[0])?,
        Fault::KillTrainer => cluster.kill_trainer(targets[0]),
        Fault::PauseTrainer => cluster.pause_trainer(targets[0])?,
        Fault::BreakTrainerData => {
            if !cluster.break_trainer_data(targets[0])? {
                how = Some("skipped: the trainer was not running");
            }
        }
    }
    cluster.record_exits(history);
    Ok(Active { fault, targets: targets.to_vec(), how })
}

/// SIGTERM master `index`, wait for its exit (bounded; the exit is recorded), start it again
/// and wait until it is back in the group (recorded as a rejoin).
async fn restart_gracefully(
    cluster: &mut Cluster,
    index: usize,
    history: &History,
) -> anyhow::Result<()> {
    let exit = cluster.terminate_master(index).await?;
    tracing::info!(master = index + 1, ?exit, "nemesis: graceful stop");
    cluster.record_exits(history);
    cluster.restart_master(index)?;
    cluster.record_rejoin(index, history).await;
    Ok(())
}

/// While `active` is held: a clog cuts one more random link every `CLOG_STEP_MS`.
pub const CLOG_STEP_MS: u64 = 700;

/// One more step of an active fault (only a clog changes while held: one more link cut, or
/// one more master slowed).
pub fn tick(cluster: &Cluster, active: &Active, rng: &mut StdRng) -> anyhow::Result<()> {
    if active.fault == Fault::Clog {
        cluster.clog(rng.gen_range(0..MASTER_COUNT))?;
    }
    Ok(())
}

/// Undoes `active`: restarts the killed, resumes the paused, heals every link.
pub fn heal(cluster: &mut Cluster, active: &Active) -> anyhow::Result<()> {
    match active.fault {
        Fault::KillLeader | Fault::KillFollower | Fault::KillAll | Fault::MajorityOutage => {
            for index in &active.targets {
                cluster.restart_master(*index)?;
            }
        }
        Fault::RestartLeader
        | Fault::RestartFollower
        | Fault::RollingRestart
        | Fault::Membership => {}
        Fault::PauseLeader | Fault::PauseFollower => cluster.resume_master(active.targets[0])?,
        Fault::KillPserver => {
            cluster.restart_pserver(active.targets[0])?;
        }
        Fault::PausePserver => {
            cluster.resume_pserver(active.targets[0])?;
        }
        Fault::KillTrainer => cluster.restart_trainer(active.targets[0])?,
        Fault::BreakTrainerData => cluster.mend_trainer_data(active.targets[0])?,
        Fault::PauseTrainer => cluster.resume_trainer(active.targets[0])?,
        Fault::IsolateLeader
        | Fault::SplitOneTwo
        | Fault::Bridge
        | Fault::Clog
        | Fault::HalfOpen => {}
    }
    cluster.heal_links()
}

/// Holds `duration` in steps, ticking the fault and recording exits as they happen.
pub async fn hold(
    cluster: &mut Cluster,
    active: &Active,
    duration: Duration,
    rng: &mut StdRng,
    history: &History,
) -> anyhow::Result<()> {
    let step = Duration::from_millis(CLOG_STEP_MS);
    let mut left = duration;
    while !left.is_zero() {
        let pause = left.min(step);
        tokio::time::sleep(pause).await;
        left -= pause;
        tick(cluster, active, rng)?;
        cluster.record_exits(history);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seed gives the same schedule every time; faults never overlap and fit the run.
    #[test]
    fn schedules_are_seeded_and_fit() {
        let first = Schedule::generate(7, &Fault::ALL, 120_000);
        let again = Schedule::generate(7, &Fault::ALL, 120_000);
        let other = Schedule::generate(8, &Fault::ALL, 120_000);
        let faults =
            |schedule: &Schedule| schedule.steps.iter().map(|step| step.fault).collect::<Vec<_>>();
        assert_eq!(faults(&first), faults(&again));
        assert_ne!(faults(&first), faults(&other));
        assert!(first.steps.len() >= 8, "{}", first.steps.len());
        for pair in first.steps.windows(2) {
            assert!(pair[0].start_ms + pair[0].hold_ms < pair[1].start_ms, "{pair:?}");
        }
        assert!(first.end_ms() <= 120_000);
        assert!(Schedule::generate(1, &[], 60_000).steps.is_empty());
    }

    /// A majority outage holds exactly its fixed window (longer than every client deadline)
    /// and a rolling restart its own; the drawn faults around them keep drawn windows.
    #[test]
    fn long_faults_hold_their_fixed_windows() {
        let faults = [Fault::MajorityOutage, Fault::RollingRestart, Fault::KillLeader];
        let schedule = Schedule::generate(3, &faults, 600_000);
        let held = |fault: Fault| -> Vec<u64> {
            let steps = schedule.steps.iter().filter(|step| step.fault == fault);
            steps.map(|step| step.hold_ms).collect()
        };
        assert!(!held(Fault::MajorityOutage).is_empty(), "{schedule:?}");
        assert!(held(Fault::MajorityOutage).iter().all(|ms| *ms == MAJORITY_OUTAGE_MS));
        assert!(held(Fault::RollingRestart).iter().all(|ms| *ms == ROLLING_RESTART_MS));
        assert!(held(Fault::KillLeader).iter().all(|ms| (HOLD_MS.0..=HOLD_MS.1).contains(ms)));
        assert!(schedule.end_ms() <= 600_000);
    }
}
