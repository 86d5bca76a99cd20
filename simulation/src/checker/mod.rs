//! The safety checkers, one file per invariant, run after every step of a simulation on what
//! every node shows: its metrics and vote, its log (as its disk holds it), what its state
//! machine applied, and the task-queue state; plus the clients' acknowledged writes.
//!
//! `state_machine_safety` also builds the canonical log (the first entry applied at each index,
//! which every other apply must equal); `client_visible`, `epoch_fencing`, `dispatch_order`
//! (a pass's tasks come in its order: by id, or the permutation of a shuffled job's seed),
//! `slot_holders` and `lease_terms` read it in order. `incarnation_files` checks that every slot checkpoint a
//! node's state records lies in its own job incarnation's directory; `restore_fencing` that no
//! push computed before a restore is applied to the restored model; `rendezvous_keys` that
//! every rendezvous run's keys answer as a model replaying the log in order does (a compare by
//! version writes only at the key's version, versions never repeat, adds count once).
//! `membership` reads the canonical log's membership entries (joint consensus only; a change
//! answered as done is committed) and notes each removal, by which `removed_members` holds a
//! removed member to never leading again nor applying past its removal; `state_agreement`
//! that nodes at the same applied index hold the same state.
//!
//! The group runs one job or several at once. The Raft checkers, state machine safety, lease
//! terms and the task-queue invariants (on the whole `MasterState`) are the group's; the
//! checkers of what is keyed by task id, trainer id, slot or generation (epoch fencing,
//! client-visible safety, slot holders, dataset answers) keep their memory per job
//! (`per_job.rs`): an entry is its job's by `job_directory.rs`, a client's fact or event by the
//! client's job.

mod client_visible;
mod commit_durability;
mod dataset_answers;
mod dispatch_order;
mod election_safety;
mod epoch_fencing;
mod incarnation_files;
mod job_directory;
mod leader_completeness;
mod lease_terms;
mod log_matching;
mod membership;
mod per_job;
mod raft_core;
mod removed_members;
mod rendezvous_keys;
mod restore_fencing;
mod slot_holders;
mod state_agreement;
mod state_machine_safety;
mod task_queue;

use std::collections::BTreeMap;

use consensus::Metrics;
use master::state::MasterState;
use openraft::LogId;

use crate::history::{AckedWrite, DatasetEvent, PushEvent, RendezvousEvent, SlotEvent};
use crate::job::SimJob;
use crate::observer::AppliedEntry;

pub use client_visible::{ClientVisible, TasksSeen};
pub use dataset_answers::DatasetAnswers;
pub use dispatch_order::DispatchOrder;
pub use election_safety::ElectionSafety;
pub use epoch_fencing::EpochFencing;
pub use job_directory::JobDirectory;
pub use leader_completeness::LeaderCompleteness;
pub use lease_terms::LeaseTerms;
pub use membership::{AckedChange, MemberChangeKind, MembershipChanges};
pub use rendezvous_keys::RendezvousKeys;
pub use slot_holders::SlotHolders;
pub use state_machine_safety::{CanonicalLog, StateMachineSafety};
pub use task_queue::TaskQueueInvariants;

/// What one running node shows after a step.
pub struct NodeView {
    pub id: u64,
    pub incarnation: u64,
    /// How many times its disk was wiped (a wiped node is a new member with the old id).
    pub life: u64,
    pub metrics: Metrics,
    /// The term this node leads and when (simulated ms) it began leading it, as the node
    /// itself noted: the checkers may look only after a pause (a graceful stop is awaited).
    pub leading_since_ms: Option<(u64, u64)>,
    /// Whether openraft's core task still runs (it stops on a panic or a fatal error).
    pub core_running: bool,
    /// Index -> (log id, payload hash) of the entries its disk holds.
    pub log: BTreeMap<u64, (LogId<u64>, u64)>,
    /// The last entry its log was purged behind (a durable snapshot covers it).
    pub purged: Option<LogId<u64>>,
    /// The vote its disk would keep in a crash.
    pub durable_vote: Option<openraft::Vote<u64>>,
    /// The commit it last saved: what its leader announced (a leader's own, for a leader).
    pub committed: Option<LogId<u64>>,
    /// The last index its disk would keep in a crash.
    pub durable_last_index: Option<u64>,
    /// The index of the last entry `state` holds.
    pub applied_index: u64,
    pub state: MasterState,
}

/// Everything the checkers see after one step.
pub struct Observation {
    pub nodes: Vec<NodeView>,
    /// Entries applied since the last step, by node id (crashed incarnations included).
    pub applied: Vec<(u64, AppliedEntry)>,
    /// Writes acknowledged to clients since the last step.
    pub acked: Vec<AckedWrite>,
    /// What pservers were told of their slots since the last step.
    pub slot_events: Vec<SlotEvent>,
    /// Pushes trainers made to pservers since the last step, and what became of them.
    pub push_events: Vec<PushEvent>,
    /// What trainers were told of their jobs' datasets since the last step.
    pub dataset_events: Vec<DatasetEvent>,
    /// What rendezvous agents asked for and were told since the last step.
    pub rendezvous_events: Vec<RendezvousEvent>,
    /// Membership changes answered as done since the last step.
    pub membership_acks: Vec<AckedChange>,
    /// How many times each node's disk was wiped so far.
    pub lives: BTreeMap<u64, u64>,
    /// Simulated time of the observation.
    pub now_ms: u64,
}

/// A broken safety (or liveness) rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule, as its checker is named.
    pub invariant: &'static str,
    /// What was seen, for a person.
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}: {}", self.invariant, self.detail)
    }
}

impl Violation {
    pub fn new(invariant: &'static str, detail: String) -> Self {
        Self { invariant, detail }
    }
}

/// Every checker with the memory it keeps between steps.
pub struct Checkers {
    jobs: JobDirectory,
    election: ElectionSafety,
    state_machine: StateMachineSafety,
    leader_completeness: LeaderCompleteness,
    task_queue: TaskQueueInvariants,
    client_visible: ClientVisible,
    epoch_fencing: EpochFencing,
    dispatch_order: DispatchOrder,
    lease_terms: LeaseTerms,
    slot_holders: SlotHolders,
    dataset_answers: DatasetAnswers,
    rendezvous_keys: RendezvousKeys,
    membership: MembershipChanges,
}

impl Checkers {
    /// Checkers for masters with these trainer and pserver leases, running `jobs`.
    pub fn new((trainer_lease_ms, pserver_lease_ms): (u64, u64), jobs: &[SimJob]) -> Self {
        Self {
            jobs: JobDirectory::new(jobs.iter().map(|job| job.name.clone()).collect()),
            election: ElectionSafety::default(),
            state_machine: StateMachineSafety::default(),
            leader_completeness: LeaderCompleteness::default(),
            task_queue: TaskQueueInvariants::default(),
            client_visible: ClientVisible::default(),
            epoch_fencing: EpochFencing::default(),
            dispatch_order: DispatchOrder::default(),
            lease_terms: LeaseTerms::new(trainer_lease_ms, pserver_lease_ms),
            slot_holders: SlotHolders::new(pserver_lease_ms),
            dataset_answers: DatasetAnswers::new(jobs),
            rendezvous_keys: RendezvousKeys::default(),
            membership: MembershipChanges::default(),
        }
    }

    /// Runs every checker on one step's observation; the first violation found.
    pub fn check(&mut self, observation: &Observation) -> Result<(), Violation> {
        raft_core::check(&observation.nodes)?;
        commit_durability::check(&observation.nodes)?;
        self.election.check(&observation.nodes)?;
        log_matching::check(&observation.nodes)?;
        self.state_machine.check(&observation.applied)?;
        let canonical = self.state_machine.canonical();
        state_agreement::check(&observation.nodes)?;
        self.membership.check(canonical, &observation.lives, &observation.membership_acks)?;
        removed_members::check(&observation.nodes, self.membership.removed())?;
        self.leader_completeness.check(
            &observation.nodes,
            canonical,
            self.election.highest_term(),
        )?;
        self.task_queue.check(&observation.nodes)?;
        incarnation_files::check(&observation.nodes)?;
        self.jobs.learn(&observation.nodes)?;
        let jobs = &self.jobs;
        self.epoch_fencing.check(canonical, jobs)?;
        self.dispatch_order.check(canonical, jobs)?;
        self.client_visible.check(&observation.acked, canonical, jobs, observation.now_ms)?;
        self.lease_terms.check(&observation.nodes, canonical, observation.now_ms)?;
        self.slot_holders.check(&observation.slot_events, canonical, jobs)?;
        self.dataset_answers.check(&observation.dataset_events)?;
        restore_fencing::check(&observation.push_events)?;
        self.rendezvous_keys.check(canonical, &observation.rendezvous_events)?;
        Ok(())
    }

    /// Per job, the distinct tasks the canonical log showed dispatched and accepted as
    /// finished in it, as client-visible safety attributed them.
    pub fn tasks_seen(&self) -> BTreeMap<String, TasksSeen> {
        self.client_visible.tasks_seen()
    }

    /// How many membership entries the group committed.
    pub fn membership_entries(&self) -> u64 {
        self.membership.entries_read()
    }
}
