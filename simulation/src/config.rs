//! What one simulated run does: the seed, its jobs (their sizes, kinds, trainers and
//! pservers), how long each phase lasts, and the test-only switches that plant bugs.

use crate::dataset::SimDataset;
use crate::job::SimJob;

/// Bugs planted on purpose, to prove the checkers find them. Off in every real run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlantedBugs {
    /// The simulated log store acknowledges an append before its flush made it durable.
    pub ack_before_durable: bool,
    /// Bugs planted in the production code (`consensus::planted`, `master::planted`, `pserver::planted`), by name,
    /// switched on for the run's thread only; a build without the `planted-bugs` feature
    /// refuses to run any.
    pub production: &'static [&'static str],
}

/// A seed's fault phase: how long, and how often the fault injector acts. A third of the seeds
/// are storms (a fault drawn every 100 ms), the others calmer and longer, so that a fault can
/// last long enough to play out (a leader isolated while the others take its pservers' slots).
const FAULT_PHASES: [(u64, u64); 3] = [(3_000, 100), (5_000, 300), (8_000, 600)];

/// Crashes drawn as graceful stops instead, by default.
pub const GRACEFUL_STOP_PERCENT_DEFAULT: u64 = 30;

/// The production code's planted bugs the simulation can switch on.
pub const PRODUCTION_BUGS: &[&str] = &[
    "jammed-batcher",
    "skip-epoch-check",
    "answer-before-commit",
    "deposed-heartbeats",
    "leases-across-terms",
    "restore-revives-ended",
    "claim-another-incarnation",
    "push-across-restore",
    "rendezvous-stale-version",
    "membership-ack-before-commit",
];

/// How the simulated masters are configured (flags of `raftrain master`, scaled to the
/// simulation's short runs).
#[derive(Clone, Debug)]
pub struct MasterSettings {
    pub heartbeat_ms: u64,
    /// Small, so that runs take many snapshots and long partitions end in snapshot installs.
    pub snapshot_logs_since_last: u64,
    pub snapshot_logs_kept: u64,
    pub task_timeout_min_ms: u64,
    pub trainer_lease_ms: u64,
    pub pserver_lease_ms: u64,
    pub write_timeout_ms: u64,
}

/// One run of the simulator.
#[derive(Clone, Debug)]
pub struct SimulationConfig {
    /// Every choice of the run derives from this.
    pub seed: u64,
    /// Master nodes; ids are `1..=node_count`.
    pub node_count: u64,
    /// The jobs the group runs at once, drawn from the seed (one, or two), each with its own
    /// dataset, trainers and pservers.
    pub jobs: Vec<SimJob>,
    /// How long faults are injected (simulated time).
    pub fault_phase_ms: u64,
    /// How often the fault injector acts during the fault phase.
    pub fault_interval_ms: u64,
    /// After the faults heal, the job must finish within this (simulated time).
    pub liveness_ms_max: u64,
    /// How often the checkers run (simulated time).
    pub step_ms: u64,
    /// How long a flush of the simulated disk takes (a range, drawn per flush).
    pub flush_delay_ms: (u64, u64),
    pub master: MasterSettings,
    /// Each `MasterClient` attempt's deadline, and how long one call retries.
    pub client_rpc_timeout_ms: u64,
    pub client_call_deadline_ms: u64,
    /// After the heal, every client call must complete within this.
    pub healed_call_ms_max: u64,
    pub bugs: PlantedBugs,
    /// Of the crashes the fault injector draws, this percentage are graceful stops instead
    /// (SIGTERM: a leader hands leadership off before it exits).
    pub graceful_stop_percent: u64,
    /// At this time of the fault phase (simulated ms), the leader's disk fails its next flush
    /// with an I/O error (off unless set: it is not in the drawn faults, so no seed's
    /// schedule changes with it).
    pub flush_failure_at_ms: Option<u64>,
    /// At the first of these (simulated ms into the fault phase), the leader's disk stalls for
    /// the second: every flush waits (off unless set, like `flush_failure_at_ms`).
    pub leader_disk_stall_ms: Option<(u64, u64)>,
    /// An operator checkpoints, cancels and then tries to restore the run's last job
    /// (`operator.rs`; off unless set, so that no seed's schedule changes with it).
    pub operator: bool,
    /// Rendezvous agents write one run's keys through the fault phase
    /// (`rendezvous_agents.rs`; off unless set, like `operator`).
    pub rendezvous: bool,
    /// The membership nemesis removes, wipes and re-adds members, grows and shrinks the group
    /// through the fault phase (`membership_nemesis.rs`; off unless set, like `operator`).
    pub membership: bool,
    /// Trainers report each finished task with their next ask, one write for both
    /// (`PassWalker::hand_off`; off unless set, like `operator`).
    pub hand_offs: bool,
    /// Trace every applied command and its answer (to read a failing seed).
    pub verbose: bool,
    /// How many of the trace's last lines a report keeps.
    pub trace_lines: usize,
}

impl SimulationConfig {
    /// The configuration the tests and the runner use: small enough that hundreds of seeds run
    /// in a couple of minutes in a debug build.
    pub fn new(seed: u64) -> Self {
        let tempo = (crate::rng::SimRng::derive(seed, 4).next_u64() % 3) as usize;
        Self {
            seed,
            node_count: 3,
            jobs: SimJob::draw_all(seed, SimJob::drawn_count(seed)),
            fault_phase_ms: FAULT_PHASES[tempo].0,
            fault_interval_ms: FAULT_PHASES[tempo].1,
            liveness_ms_max: 30_000,
            step_ms: 10,
            flush_delay_ms: (1, 20),
            master: MasterSettings {
                heartbeat_ms: 50,
                snapshot_logs_since_last: 10,
                snapshot_logs_kept: 2,
                task_timeout_min_ms: 300,
                trainer_lease_ms: 1_000,
                pserver_lease_ms: 1_000,
                write_timeout_ms: 1_000,
            },
            client_rpc_timeout_ms: 500,
            client_call_deadline_ms: 5_000,
            healed_call_ms_max: 5_000,
            bugs: PlantedBugs::default(),
            graceful_stop_percent: GRACEFUL_STOP_PERCENT_DEFAULT,
            flush_failure_at_ms: None,
            leader_disk_stall_ms: None,
            operator: false,
            rendezvous: false,
            membership: false,
            hand_offs: false,
            verbose: false,
            trace_lines: crate::trace::TAIL_LINES_DEFAULT,
        }
    }

    /// The same run with `bugs` planted.
    pub fn with_bugs(mut self, bugs: PlantedBugs) -> Self {
        self.bugs = bugs;
        self
    }

    /// The same run, with the leader's disk failing one flush `at_ms` into the fault phase.
    pub fn with_flush_failure_at(mut self, at_ms: u64) -> Self {
        self.flush_failure_at_ms = Some(at_ms);
        self
    }

    /// The same run, with the leader's disk stalled `at_ms` into the fault phase for
    /// `for_ms`, and no other fault (so whatever election happens is the stall's doing).
    pub fn with_leader_disk_stall(mut self, at_ms: u64, for_ms: u64) -> Self {
        self.leader_disk_stall_ms = Some((at_ms, for_ms));
        self.fault_interval_ms = u64::MAX;
        self
    }

    /// The same run with an operator cancelling its last job (and then trying to restore it).
    pub fn with_operator(mut self) -> Self {
        self.operator = true;
        self
    }

    /// The same run with rendezvous agents racing on one run's keys.
    pub fn with_rendezvous(mut self) -> Self {
        self.rendezvous = true;
        self
    }

    /// The same run with the membership nemesis changing the group's members.
    pub fn with_membership(mut self) -> Self {
        self.membership = true;
        self
    }

    /// The same run with trainers handing tasks off in one write (finish and next ask).
    pub fn with_hand_offs(mut self) -> Self {
        self.hand_offs = true;
        self
    }

    /// The same run with its first job over `dataset` instead of the one the seed draws.
    pub fn with_dataset(mut self, dataset: SimDataset) -> Self {
        self.jobs[0].dataset = dataset;
        self
    }

    /// The same run with `count` jobs (one or two) instead of as many as the seed draws; the
    /// first job's dataset stays. Seeds found before runs had two jobs ran one.
    pub fn with_job_count(mut self, count: usize) -> Self {
        let first_dataset = self.jobs[0].dataset;
        self.jobs = SimJob::draw_all(self.seed, count);
        self.jobs[0].dataset = first_dataset;
        self
    }

    /// Whether every client call names its job: in a run of several jobs. In a run of one,
    /// clients name none (the group's only job), as they did before runs had two.
    pub fn clients_name_jobs(&self) -> bool {
        self.jobs.len() > 1
    }

    /// Node ids, lowest first.
    pub fn node_ids(&self) -> Vec<u64> {
        (1..=self.node_count).collect()
    }
}
