//! The recorder: once a second, looks at this master's own replica (its Raft metrics and its
//! applied state, no RPC) and feeds what it saw to the [`History`] the dashboard shows; and
//! whenever the replica applies something, at most every [`EVAL_LOOK_MS`], it looks at each
//! job's newest evaluation alone, so no pass's evaluation is missed when passes end faster
//! than once a second. Every master records for itself, so a follower's timeline holds the
//! leader changes it saw, and a master restarted starts its history afresh.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use consensus::ConsensusNode;
use tokio::sync::watch;

use super::history::{History, JobObservation, Observation};
use crate::replicated_state::ReplicatedState;
use crate::state::StatusView;

/// How often the replica is looked at: the rate chart's resolution.
pub(crate) const SAMPLE_INTERVAL_MS: u64 = 1_000;

/// The least time between two looks at the evaluations (reading them is a few fields per job).
pub(crate) const EVAL_LOOK_MS: u64 = 20;

/// The history, shared between the recorder and the dashboard's handlers.
pub(crate) type SharedHistory = Arc<Mutex<History>>;

/// Records into `history` until `stopped` turns true.
pub(crate) fn spawn(
    node: ConsensusNode<ReplicatedState>,
    history: SharedHistory,
    mut stopped: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_millis(SAMPLE_INTERVAL_MS));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut applied = node.metrics();
        loop {
            let applied_changed = tokio::select! {
                _ = ticks.tick() => false,
                changed = applied.changed() => match changed {
                    Ok(()) => true,
                    Err(_) => return,
                },
                _ = stopped.wait_for(|stop| *stop) => return,
            };
            match applied_changed {
                false => record(&node, &history),
                true => {
                    record_evals(&node, &history);
                    tokio::time::sleep(Duration::from_millis(EVAL_LOOK_MS)).await;
                }
            }
        }
    })
}

/// Each job's newest evaluation, into the history.
fn record_evals(node: &ConsensusNode<ReplicatedState>, history: &SharedHistory) {
    let evals = node.read(|state| {
        let jobs = state.state().jobs();
        let evals = jobs.filter_map(|(id, job)| {
            let eval = job.eval?;
            Some((id, (eval.pass, eval.loss(), eval.accuracy())))
        });
        evals.collect::<BTreeMap<_, _>>()
    });
    let mut history = history.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    history.observe_evals(&evals);
}

/// One look at the replica, recorded at the wall clock's now.
pub(crate) fn record(node: &ConsensusNode<ReplicatedState>, history: &SharedHistory) {
    let seen = observe(node);
    let now_ms = wall_clock_ms();
    // A poisoned lock means a panic mid-update of plain collections; they stay usable.
    let mut history = history.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    history.observe(now_ms, &seen);
}

/// Milliseconds since the Unix epoch (the page shows them as times of day).
pub(crate) fn wall_clock_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

fn observe(node: &ConsensusNode<ReplicatedState>) -> Observation {
    let cluster = node.cluster_info();
    let jobs = node.read(|state| {
        let jobs = state.state().jobs();
        jobs.map(|(id, job)| (id, job_observation(&job.status()))).collect::<BTreeMap<_, _>>()
    });
    Observation { leader_id: cluster.leader_id, term: cluster.term, jobs }
}

fn job_observation(status: &StatusView) -> JobObservation {
    JobObservation {
        name: status.job.clone().unwrap_or_default(),
        pass: status.pass,
        task_count: status.task_count,
        finished: status.done_count + status.failed_count,
        eval: status.eval.map(|eval| (eval.pass, eval.loss(), eval.accuracy())),
        slots: status
            .pservers
            .iter()
            .filter_map(|slot| Some((slot.slot, slot.holder.as_ref()?.generation)))
            .collect(),
    }
}
