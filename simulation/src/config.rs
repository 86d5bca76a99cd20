//! What one simulated run does: the seed, the size of the job, how long each phase lasts, and
//! the test-only switches that plant bugs.

/// Bugs planted on purpose, to prove the checkers find them. Off in every real run; a field of
/// the configuration (not a cargo feature) so that no production build can turn one on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlantedBugs {
    /// The log store acknowledges an append before its flush made it durable.
    pub ack_before_durable: bool,
    /// The state machine rewrites a stale `TaskFinished` to the pending epoch.
    pub accept_stale_epoch: bool,
}

/// One run of the simulator.
#[derive(Clone, Debug)]
pub struct SimulationConfig {
    /// Every choice of the run derives from this.
    pub seed: u64,
    /// Master nodes; ids are `1..=node_count`.
    pub node_count: u64,
    /// Simulated trainers.
    pub client_count: u64,
    /// One chunk per task.
    pub task_count: u64,
    pub passes: u32,
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
    pub bugs: PlantedBugs,
}

impl SimulationConfig {
    /// The configuration the tests and the runner use: small enough that hundreds of seeds run
    /// in a couple of minutes in a debug build.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            node_count: 3,
            client_count: 3,
            task_count: 20,
            passes: 2,
            fault_phase_ms: 3_000,
            fault_interval_ms: 100,
            liveness_ms_max: 30_000,
            step_ms: 10,
            flush_delay_ms: (1, 20),
            bugs: PlantedBugs::default(),
        }
    }

    /// The same run with `bugs` planted.
    pub fn with_bugs(mut self, bugs: PlantedBugs) -> Self {
        self.bugs = bugs;
        self
    }

    /// Node ids, lowest first.
    pub fn node_ids(&self) -> Vec<u64> {
        (1..=self.node_count).collect()
    }
}
