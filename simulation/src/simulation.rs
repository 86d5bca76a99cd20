//! One simulated run: start the group, report every job's dataset and start each job's
//! trainers and pservers on a paused-clock current-thread runtime, inject faults while checking
//! every invariant after every step, then heal and require every call to complete within a
//! bound and every job to finish within a bounded simulated time.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::checker::{Checkers, NodeView, Observation, TasksSeen, Violation};
use crate::client::{ClientContext, SimTrainer, CLIENT_ID_BASE};
use crate::cluster::Cluster;
use crate::config::SimulationConfig;
use crate::data_plane::SimDataPlane;
use crate::dataset::{recordio_path, SimDataset};
use crate::history::History;
use crate::job::SimJob;
use crate::membership_nemesis::MembershipNemesis;
use crate::nemesis::Nemesis;
use crate::network::SimNetwork;
use crate::operator::SimOperator;
use crate::pserver::SimPServer;
use crate::rng::SimRng;
use crate::trace::Trace;

/// How long the group may take to elect its first leader and take a job's dataset.
const SETUP_MS_MAX: u64 = 30_000;

/// What a run found.
#[derive(Clone, Debug)]
pub struct SimulationReport {
    pub seed: u64,
    /// The hash of the event trace: equal for two runs of one seed.
    pub trace_hash: u64,
    pub event_count: u64,
    /// Simulated time the run took.
    pub simulated_ms: u64,
    /// The first violated invariant, if any.
    pub violation: Option<Violation>,
    /// The last events before the end, to read a failure.
    pub trace_tail: Vec<String>,
    /// How often each kind of fault and rare event happened.
    pub tallies: std::collections::BTreeMap<&'static str, u64>,
    /// Per job, the distinct tasks the checkers saw it dispatch and finish.
    pub tasks_seen: std::collections::BTreeMap<String, TasksSeen>,
    /// The command that replays this run: its seed and every setting a flag overrode.
    pub replay: String,
}

impl SimulationReport {
    /// The command that replays this run.
    pub fn replay_command(&self) -> String {
        self.replay.clone()
    }
}

/// The command that replays `config`: the seed, the job count and fault phase (a flag may have
/// overridden what the seed draws), and the planted bugs (in a build that has them).
pub fn replay_command(config: &SimulationConfig) -> String {
    let bugs = &config.bugs;
    let features = if bugs.production.is_empty() { "" } else { " --features planted-bugs" };
    let mut command = format!(
        "cargo run -p simulation --release{features} -- --seed {} --jobs {} --fault-phase-ms {}",
        config.seed,
        config.jobs.len(),
        config.fault_phase_ms
    );
    if bugs.ack_before_durable {
        command.push_str(" --plant-ack-before-durable");
    }
    for bug in bugs.production {
        command.push_str(&format!(" --plant {bug}"));
    }
    if let Some(at_ms) = config.flush_failure_at_ms {
        command.push_str(&format!(" --flush-failure-at-ms {at_ms}"));
    }
    if let Some((at_ms, for_ms)) = config.leader_disk_stall_ms {
        let flags = format!(" --leader-disk-stall-at-ms {at_ms} --leader-disk-stall-ms {for_ms}");
        command.push_str(&flags);
    }
    if config.operator {
        command.push_str(" --operator");
    }
    if config.hand_offs {
        command.push_str(" --hand-offs");
    }
    if config.rendezvous {
        command.push_str(" --rendezvous");
    }
    if config.membership {
        command.push_str(" --membership");
    }
    command
}

/// Runs one simulation on its own paused-clock runtime, with the run's planted bugs switched
/// on for this thread only; refuses production bugs a build without them cannot plant.
pub fn run(config: &SimulationConfig) -> anyhow::Result<SimulationReport> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build()?;
    crate::planted::plant_on_this_thread(config.bugs.production)?;
    let report = runtime.block_on(drive(config));
    crate::planted::plant_on_this_thread(&[])?;
    report
}

/// Everything a run holds while it runs.
struct Run {
    config: SimulationConfig,
    trace: Trace,
    cluster: Cluster,
    history: History,
    /// Each job's trainers, with their job and id in the history.
    trainers: Vec<RunningTrainer>,
    /// The pservers, which serve until the run ends.
    pservers: Vec<JoinHandle<()>>,
    /// The operator, if any: the run goes on until it is done.
    operator: Option<JoinHandle<()>>,
    /// The rendezvous agents, if any, which stop asking when the fault phase ends.
    rendezvous_agents: Vec<JoinHandle<()>>,
    /// The membership nemesis, if any.
    membership: Option<MembershipNemesis>,
    checkers: Checkers,
}

/// A trainer's task, and whose it is.
struct RunningTrainer {
    job: String,
    client: u64,
    task: JoinHandle<()>,
}

async fn drive(config: &SimulationConfig) -> anyhow::Result<SimulationReport> {
    let trace = Trace::new(config.trace_lines);
    let network = SimNetwork::new(SimRng::derive(config.seed, 2), trace.clone());
    let cluster = Cluster::start(config, network.clone(), trace.clone()).await?;
    let history = History::new(trace.clone());
    let context = ClientContext::new(network, history.clone(), trace.clone());
    for job in &config.jobs {
        report_dataset(config, job, &context).await?;
    }
    if config.jobs.len() > 1 {
        trace.tally("two-job run");
    }
    let (mut trainers, mut pservers) = (Vec::new(), Vec::new());
    for job in &config.jobs {
        let plane = Arc::new(SimDataPlane::new(
            &job.name,
            job.pserver_slots,
            (history.clone(), trace.clone()),
        ));
        for index in job.trainers.clone() {
            let trainer = SimTrainer::new(index, (job, &plane), config, &context)?;
            let (job, client) = (job.name.clone(), CLIENT_ID_BASE + index);
            trainers.push(RunningTrainer { job, client, task: tokio::spawn(trainer.run()) });
        }
        for index in job.pservers.clone() {
            let pserver = SimPServer::new(index, (job, &plane), config, &context)?;
            pservers.push(tokio::spawn(pserver.run()));
        }
    }
    let operator = match config.jobs.last().filter(|_| config.operator) {
        Some(job) => Some(tokio::spawn(SimOperator::new(job, config, &context)?.run())),
        None => None,
    };
    let rendezvous_agents = crate::rendezvous_agents::spawn_all(config, &context)?;
    let leases_ms = (config.master.trainer_lease_ms, config.master.pserver_lease_ms);
    let membership = MembershipNemesis::for_run(config, &trace);
    let mut run = Run {
        config: config.clone(),
        trace: trace.clone(),
        cluster,
        history,
        trainers,
        pservers,
        operator,
        rendezvous_agents,
        membership,
        checkers: Checkers::new(leases_ms, &config.jobs),
    };
    let violation = run.phases().await?.err();
    if let Some(violation) = &violation {
        trace.record(format!("violation {violation}"));
    }
    run.trainers.iter().for_each(|trainer| trainer.task.abort());
    let clients = run.pservers.iter().chain(&run.operator).chain(&run.rendezvous_agents);
    clients.for_each(JoinHandle::abort);
    run.cluster.stop_all().await;
    Ok(SimulationReport {
        seed: config.seed,
        trace_hash: trace.hash(),
        event_count: trace.event_count(),
        simulated_ms: trace.now_ms(),
        violation,
        trace_tail: trace.tail(),
        tallies: trace.tallies(),
        tasks_seen: run.checkers.tasks_seen(),
        replay: replay_command(config),
    })
}

/// Job `job`'s RecordIO file of `tasks` one-record chunks (with one chunk per task, one task
/// each), at a path that depends only on these (see `recordio_path`). Written to a temp file
/// and renamed into place, so runs in parallel threads never see half a file.
fn write_dataset(job: &str, tasks: u64) -> anyhow::Result<String> {
    use storage::recordio::{Writer, WriterOptions};
    let path = recordio_path(job, tasks);
    let dir =
        path.parent().ok_or_else(|| anyhow::anyhow!("{} has no directory", path.display()))?;
    std::fs::create_dir_all(dir)?;
    let temp = tempfile::NamedTempFile::new_in(dir)?;
    let options = WriterOptions { max_chunk_bytes: 1, ..Default::default() };
    let mut writer = Writer::new(temp.as_file(), options);
    for task in 0..tasks {
        writer.write_record(format!("record {task}").as_bytes())?;
    }
    writer.finish()?;
    temp.persist(&path)?;
    Ok(path.display().to_string())
}

/// The submitter reports job `job`'s dataset through the master service (which makes the
/// job), before the trainers start and before any fault: its RecordIO file, or the seed's index
/// range.
async fn report_dataset(
    config: &SimulationConfig,
    job: &SimJob,
    context: &ClientContext,
) -> anyhow::Result<()> {
    let master = context.master_client(config, config.seed ^ 0x5eed)?;
    let (name, passes) = (job.name.as_str(), job.passes);
    let report = async {
        let sizes = match job.dataset {
            SimDataset::RecordIo => {
                let patterns = [write_dataset(name, job.task_count)?];
                master.report_shuffled_dataset(name, &patterns, passes, job.shuffle_seed).await?
            }
            SimDataset::IndexRange { size, shard_size } => {
                let range = (size, shard_size);
                master.report_shuffled_index_dataset(name, range, passes, job.shuffle_seed).await?
            }
        };
        Ok::<_, anyhow::Error>(sizes)
    };
    let sizes = tokio::time::timeout(Duration::from_millis(SETUP_MS_MAX), report)
        .await
        .map_err(|_| {
            anyhow::anyhow!("the report of job {name} did not finish in {SETUP_MS_MAX} ms")
        })?
        .map_err(|error| error.context(format!("report job {name}")))?;
    // A one-job run traces as it did before runs had two jobs.
    let of_job = if config.jobs.len() > 1 { format!(" of job {name}") } else { String::new() };
    context.trace.record(format!("dataset{of_job} reported: {:?} {sizes:?}", job.dataset));
    if let SimDataset::IndexRange { .. } = job.dataset {
        context.trace.tally("index-range job");
    }
    Ok(())
}

impl Run {
    /// The fault phase, the heal, and the liveness phase. The outer error is a harness
    /// failure; the inner one is a violation found in the system.
    async fn phases(&mut self) -> anyhow::Result<Result<(), Violation>> {
        let mut nemesis = Nemesis::new(
            SimRng::derive(self.config.seed, 3),
            (SimRng::derive(self.config.seed, 5), self.config.graceful_stop_percent),
            self.trace.clone(),
        );
        let step_ms = self.config.step_ms.max(1);
        let mut elapsed_ms = 0;
        let mut flush_failed = false;
        let mut stall = self.config.leader_disk_stall_ms.map(DiskStall::new);
        while elapsed_ms < self.config.fault_phase_ms {
            tokio::time::sleep(Duration::from_millis(step_ms)).await;
            elapsed_ms += step_ms;
            if elapsed_ms.is_multiple_of(self.config.fault_interval_ms.max(1)) {
                nemesis.act(&mut self.cluster).await?;
            }
            let flush_fails_now =
                self.config.flush_failure_at_ms.is_some_and(|at| elapsed_ms >= at);
            if flush_fails_now && !flush_failed {
                flush_failed = self.cluster.fail_leader_flush();
            }
            if let Some(stall) = &mut stall {
                stall.step(&self.cluster, elapsed_ms);
            }
            if let Some(membership) = &mut self.membership {
                membership.step(&mut self.cluster).await?;
            }
            self.cluster.restart_stopped_cores().await?;
            if let Err(violation) = self.step() {
                return Ok(Err(violation));
            }
        }
        nemesis.heal(&mut self.cluster).await?;
        if let Some(membership) = &mut self.membership {
            membership.heal();
        }
        let healed_ms = self.trace.now_ms();
        let deadline_ms = elapsed_ms + self.config.liveness_ms_max;
        while elapsed_ms < deadline_ms {
            tokio::time::sleep(Duration::from_millis(step_ms)).await;
            elapsed_ms += step_ms;
            if let Some(membership) = &mut self.membership {
                membership.step(&mut self.cluster).await?;
            }
            self.cluster.restart_stopped_cores().await?;
            if let Err(violation) = self.step().and_then(|()| self.calls_complete(healed_ms)) {
                return Ok(Err(violation));
            }
            if self.finished() {
                self.trace.record("job finished");
                return Ok(Ok(()));
            }
        }
        Ok(Err(self.liveness_violation()))
    }

    /// Every checker on what every node shows now.
    fn step(&mut self) -> Result<(), Violation> {
        let mut observation = self.observe();
        if let Some(membership) = &mut self.membership {
            observation.membership_acks = membership.take_acks();
        }
        self.checkers.check(&observation)
    }

    /// After the heal, every call completes within the bound, on whichever node leads.
    fn calls_complete(&self, healed_ms: u64) -> Result<(), Violation> {
        let (now_ms, bound_ms) = (self.trace.now_ms(), self.config.healed_call_ms_max);
        let Some((client, seq, invoked_ms)) = self.history.stuck_since(healed_ms, now_ms, bound_ms)
        else {
            return Ok(());
        };
        let leader = self.cluster.leader().map(|leader| leader.id);
        Err(Violation::new(
            "liveness after heal",
            format!(
                "client {client} call {seq}, invoked at {invoked_ms} ms ({} ms after the heal), \
                 did not complete within {bound_ms} ms; leader {leader:?}",
                invoked_ms - healed_ms
            ),
        ))
    }

    fn observe(&self) -> Observation {
        let mut applied = Vec::new();
        for observer in self.cluster.retired() {
            applied.extend(observer.take_applied().into_iter().map(|entry| (0, entry)));
        }
        let mut nodes = Vec::new();
        for node in self.cluster.running() {
            for entry in node.observer.take_applied() {
                let (id, log_id, hash) = (node.id, entry.log_id, entry.payload_hash);
                self.trace.record(format!("node {id} applied {log_id} hash {hash:016x}"));
                if self.config.verbose {
                    for command in &entry.commands {
                        let request = master::state::decode_request(&command.request);
                        let response = master::state::decode_response(&command.response);
                        self.trace.record(format!("  {request:?} -> {response:?}"));
                    }
                }
                applied.push((node.id, entry));
            }
            let (applied_index, state) = node.master_state_applied();
            nodes.push(NodeView {
                id: node.id,
                incarnation: node.incarnation,
                life: node.life,
                metrics: node.metrics(),
                leading_since_ms: node
                    .node
                    .leading_since()
                    .map(|(term, since)| (term, self.trace.ms_at(since))),
                core_running: node.core_running(),
                log: node.disk.summary(),
                purged: node.disk.purged(),
                durable_vote: node.disk.durable_vote(),
                committed: node.disk.committed(),
                durable_last_index: node.disk.durable_last_index(),
                applied_index,
                state,
            });
        }
        let now_ms = self.trace.now_ms();
        let (acked, slot_events) = (self.history.take_acked(), self.history.take_slot_events());
        let dataset_events = self.history.take_dataset_events();
        let push_events = self.history.take_push_events();
        let rendezvous_events = self.history.take_rendezvous_events();
        Observation {
            nodes,
            applied,
            acked,
            slot_events,
            push_events,
            dataset_events,
            rendezvous_events,
            membership_acks: Vec::new(),
            lives: self.cluster.lives(),
            now_ms,
        }
    }

    /// Every job finished (or the operator cancelled it): each of its trainers saw
    /// `JobFinished` (or `JobCancelled`), and so does the leader's state; the operator is done.
    fn finished(&self) -> bool {
        let trainers_done = self.trainers.iter().all(|trainer| trainer.task.is_finished())
            && self.operator.as_ref().is_none_or(JoinHandle::is_finished);
        let Some(state) = self.cluster.leader().map(|leader| leader.master_state()) else {
            return false;
        };
        let over = |job: &master::state::JobState| job.job_finished() || job.is_cancelled();
        let job_done = |job: &SimJob| state.job_named(&job.name).is_some_and(over);
        trainers_done && self.config.jobs.iter().all(job_done)
    }

    /// The liveness violation, naming every unfinished job: its unfinished trainers and its
    /// queue as the leader's state shows it.
    fn liveness_violation(&self) -> Violation {
        let leader = self.cluster.leader();
        let state = leader.as_ref().map(|leader| leader.master_state());
        let mut unfinished = Vec::new();
        for job in &self.config.jobs {
            let trainers: Vec<u64> = self
                .trainers
                .iter()
                .filter(|trainer| trainer.job == job.name && !trainer.task.is_finished())
                .map(|trainer| trainer.client)
                .collect();
            let job_state = state.as_ref().and_then(|state| state.job_named(&job.name));
            if trainers.is_empty()
                && job_state.is_some_and(|job| job.job_finished() || job.is_cancelled())
            {
                continue;
            }
            let status = job_state.map(|job| {
                let status = job.status();
                format!(
                    "pass {} todo {} pending {} done {} failed {}",
                    status.pass,
                    status.todo_count,
                    status.pending_count,
                    status.done_count,
                    status.failed_count
                )
            });
            unfinished.push(format!(
                "job {:?} unfinished: trainers {trainers:?} unfinished, {status:?}",
                job.name
            ));
        }
        Violation::new(
            "liveness",
            format!(
                "{} ms after the faults healed: leader {:?}, {}",
                self.config.liveness_ms_max,
                leader.map(|leader| leader.id),
                unfinished.join("; ")
            ),
        )
    }
}

/// The leader's disk stalled for a while ([`SimulationConfig::leader_disk_stall_ms`]).
struct DiskStall {
    at_ms: u64,
    for_ms: u64,
    /// The stalled leader and its term, once the stall began.
    stalled: Option<(u64, u64)>,
    ended: bool,
}

impl DiskStall {
    fn new((at_ms, for_ms): (u64, u64)) -> Self {
        Self { at_ms, for_ms, stalled: None, ended: false }
    }

    /// Stalls the leader's disk at the first moment from `at_ms` on that there is a leader,
    /// and ends the stall `for_ms` later.
    fn step(&mut self, cluster: &Cluster, elapsed_ms: u64) {
        match self.stalled {
            None if elapsed_ms >= self.at_ms => {
                self.stalled = cluster.stall_leader_disk();
                self.at_ms = elapsed_ms;
            }
            Some((id, term)) if !self.ended && elapsed_ms >= self.at_ms + self.for_ms => {
                cluster.end_disk_stall(id, term);
                self.ended = true;
            }
            _ => {}
        }
    }
}
