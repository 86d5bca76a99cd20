//! The dashboard's JSON (`GET /api/v1/view`): the leader's view as the client crate types it
//! (`JobList`, `JobStatus` with its `to_json`, each member's `GroupView`), this master's own
//! [`History`], and who answers (a leader, or a follower passing the leader's view on). Every
//! list is cut to a share of a group-wide budget and every user-supplied text to a length, so
//! the largest group's view stays below [`VIEW_BYTES_MAX`] (`tests::largest_view_is_bounded`).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::state::RUN_COUNT_MAX;
use client::{JobStatus, JobSummary};
use consensus::ClusterInfo;

use super::fetch::Fetched;
use super::history::{Event, History, JobHistory, TimelineEntry};

/// The group-wide budgets of listed items, shared out among the jobs.
const TRAINERS_SHOWN_MAX: usize = 256;
const PSERVERS_SHOWN_MAX: usize = 256;
const FAILED_TASKS_SHOWN_MAX: usize = 64;
/// Every job shows at least this many of each list, however many jobs share the budget.
const SHOWN_PER_JOB_MIN: usize = 2;
/// Members listed (a group has three or five).
const MEMBERS_SHOWN_MAX: usize = 16;
/// Names and addresses are cut to this many characters, failure reasons to the other.
const TEXT_CHARS_MAX: usize = 128;
const REASON_CHARS_MAX: usize = 512;
/// The largest view's JSON, measured by the test below for the largest group.
pub(crate) const VIEW_BYTES_MAX: usize = 3 << 20;

/// Who answers: this master's id and what its own Raft metrics say.
pub(crate) struct Answering<'a> {
    pub local: &'a ClusterInfo,
    pub history: &'a History,
    pub now_ms: u64,
}

/// The whole view.
pub(crate) fn render(answering: &Answering<'_>, fetched: &Fetched) -> Value {
    let local = answering.local;
    let role = match local.leader_id {
        Some(leader) if leader == local.node_id => "leader",
        Some(_) => "follower",
        None => "no_leader",
    };
    let (jobs, leader_error) = match &fetched.jobs {
        Ok((list, statuses)) => {
            (jobs_json(fetched, &list.jobs, statuses, answering.history), Value::Null)
        }
        Err(reason) => (Vec::new(), json!(cut(reason, REASON_CHARS_MAX))),
    };
    json!({
        "version": 1,
        "now_ms": answering.now_ms,
        "served_by": {"id": local.node_id, "role": role, "leader": local.leader_id, "term": local.term},
        "leader_reachable": leader_error.is_null(),
        "leader_error": leader_error,
        "group": group_json(answering, fetched),
        "jobs": jobs,
        "rendezvous": rendezvous_json(&fetched.rendezvous),
        "timeline": answering.history.timeline.iter().map(timeline_json).collect::<Vec<_>>(),
    })
}

/// The torchrun rendezvous runs (the state holds at most `RUN_COUNT_MAX`), each id cut to a
/// length, or why the leader could not list them.
fn rendezvous_json(runs: &Result<Vec<client::RendezvousRun>, String>) -> Value {
    match runs {
        Ok(runs) => json!({"runs": runs.iter().take(RUN_COUNT_MAX).map(|run| json!({
            "run": cut(&run.run, TEXT_CHARS_MAX), "keys": run.key_count, "bytes": run.bytes,
            "idle_ms": run.idle_ms, "round": run.round.as_ref().map(|round| round.round),
            "participants": run.round.as_ref().map(|round| round.participants),
            "waiting": run.round.as_ref().map(|round| round.waiting),
        })).collect::<Vec<_>>(), "error": null}),
        Err(reason) => json!({"runs": [], "error": cut(reason, REASON_CHARS_MAX)}),
    }
}

/// The members, each with its own view; the leader and since when this master has seen it.
fn group_json(answering: &Answering<'_>, fetched: &Fetched) -> Value {
    let local = answering.local;
    let members: Vec<Value> = fetched
        .members
        .iter()
        .take(MEMBERS_SHOWN_MAX)
        .map(|(id, (addr, view))| {
            let believed = local.members.iter().find(|member| member.id == *id);
            let role = believed.map(|member| member.role.as_str());
            match view {
                Ok(view) => json!({
                    "id": id, "addr": cut(addr, TEXT_CHARS_MAX), "role": role, "reachable": true,
                    "term": view.term, "leader": view.leader_id,
                    "last_log_index": view.last_log_index, "last_applied_index": view.last_applied_index,
                }),
                Err(reason) => json!({
                    "id": id, "addr": cut(addr, TEXT_CHARS_MAX), "role": role, "reachable": false,
                    "error": cut(reason, REASON_CHARS_MAX),
                }),
            }
        })
        .collect();
    let since = answering.history.leader_since();
    let since_ms = since.filter(|(leader, _, _)| *leader == local.leader_id).map(|(_, _, at)| at);
    json!({"leader": local.leader_id, "term": local.term, "leader_since_ms": since_ms, "members": members})
}

fn jobs_json(
    fetched: &Fetched,
    summaries: &[JobSummary],
    statuses: &[JobStatus],
    history: &History,
) -> Vec<Value> {
    let share = |budget: usize| (budget / summaries.len().max(1)).max(SHOWN_PER_JOB_MIN);
    let shares =
        (share(TRAINERS_SHOWN_MAX), share(PSERVERS_SHOWN_MAX), share(FAILED_TASKS_SHOWN_MAX));
    summaries
        .iter()
        .zip(statuses)
        .map(|(summary, status)| {
            let job_history =
                history.jobs.values().find(|job| job.name() == Some(summary.job.as_str()));
            let mut job = job_json(summary, status, job_history, shares);
            add_trainer_rates(&mut job, &summary.job, &fetched.trainer_rates);
            job
        })
        .collect()
}

/// One job: its status's `--json` form, its lists cut to their shares and texts to their
/// lengths, with the totals, its state, and this master's history of it.
fn job_json(
    summary: &JobSummary,
    status: &JobStatus,
    history: Option<&JobHistory>,
    (trainers, pservers, failed): (usize, usize, usize),
) -> Value {
    let mut shown = status.clone();
    shown.job = shown.job.map(|name| cut(&name, TEXT_CHARS_MAX));
    shown.trainers.truncate(trainers);
    for trainer in &mut shown.trainers {
        trainer.name = cut(&trainer.name, TEXT_CHARS_MAX);
    }
    shown.pservers.truncate(pservers);
    for pserver in &mut shown.pservers {
        pserver.addr = cut(&pserver.addr, TEXT_CHARS_MAX);
    }
    shown.failed_tasks.truncate(failed);
    for task in &mut shown.failed_tasks {
        task.reason = cut(&task.reason, REASON_CHARS_MAX);
    }
    let mut object = match shown.to_json() {
        Value::Object(object) => object,
        _ => Map::new(),
    };
    for group_key in ["leader", "leader_addr", "term", "members"] {
        object.remove(group_key);
    }
    object.insert("name".into(), json!(cut(&summary.job, TEXT_CHARS_MAX)));
    object.insert("state".into(), json!(summary.state.as_str()));
    object.insert("tasks".into(), json!(summary.task_count));
    object.insert("trainers_total".into(), json!(status.trainers.len()));
    object.insert("pservers_total".into(), json!(status.pservers.len()));
    object.insert("failed_tasks_total".into(), json!(status.failed));
    object.insert("rates".into(), rates_json(history));
    object.insert("evals".into(), evals_json(history));
    Value::Object(object)
}

/// Adds each shown trainer's `tasks_per_second` (`null` until two fetches saw its count).
fn add_trainer_rates(job: &mut Value, name: &str, rates: &BTreeMap<(String, u64), f64>) {
    let Some(trainers) = job.get_mut("trainers").and_then(Value::as_array_mut) else { return };
    for trainer in trainers {
        let id = trainer["id"].as_u64().unwrap_or_default();
        let rate = rates.get(&(name.to_string(), id)).map(|rate| (rate * 100.0).round() / 100.0);
        if let Some(object) = trainer.as_object_mut() {
            object.insert("tasks_per_second".into(), json!(rate));
        }
    }
}

/// `[[at_ms, tasks per second], ...]`, oldest first.
fn rates_json(history: Option<&JobHistory>) -> Value {
    let Some(history) = history else { return json!([]) };
    let points = history.rates.iter().map(|sample| {
        let rounded = (sample.tasks_per_second * 100.0).round() / 100.0;
        json!([sample.at_ms, rounded])
    });
    Value::Array(points.collect())
}

/// `[{pass, loss, accuracy}, ...]`, one per pass seen, oldest first.
fn evals_json(history: Option<&JobHistory>) -> Value {
    let Some(history) = history else { return json!([]) };
    let points = history.evals.iter().map(|eval| {
        json!({"pass": eval.pass, "loss": finite(eval.loss), "accuracy": finite(eval.accuracy)})
    });
    Value::Array(points.collect())
}

/// A number JSON can carry (`null` for NaN and infinities).
fn finite(value: f32) -> Value {
    match value.is_finite() {
        true => json!(value),
        false => Value::Null,
    }
}

fn timeline_json(entry: &TimelineEntry) -> Value {
    match &entry.event {
        Event::Leader { leader_id, term } => {
            json!({"at_ms": entry.at_ms, "kind": "leader", "leader": leader_id, "term": term})
        }
        Event::SlotHolder { job, slot, from, to } => json!({
            "at_ms": entry.at_ms, "kind": "slot", "job": cut(job, TEXT_CHARS_MAX),
            "slot": slot, "from_generation": from, "to_generation": to,
        }),
    }
}

/// `text` cut to `chars_max` characters, marked with an ellipsis when cut.
fn cut(text: &str, chars_max: usize) -> String {
    match text.char_indices().nth(chars_max) {
        None => text.to_string(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use client::{
        CheckpointStatus, FailedTask, GroupView, JobList, JobPhase, PServerStatus, TrainerStatus,
    };

    use super::*;
    use crate::dashboard::history::{JobObservation, Observation};
    use crate::dashboard::history::{EVALS_MAX, RATE_SAMPLES_MAX, TIMELINE_EVENTS_MAX};
    use crate::state::{
        FAILED_TASKS_SHOWN_MAX as STATE_FAILED_SHOWN_MAX, FAILURE_REASON_BYTES_MAX, JOB_COUNT_MAX,
        JOB_NAME_BYTES_MAX, PSERVER_ADDR_BYTES_MAX, PSERVER_COUNT_MAX, RUN_ID_BYTES_MAX,
        TRAINER_COUNT_MAX, TRAINER_NAME_BYTES_MAX,
    };

    /// A text of `bytes` control characters: each takes six bytes in JSON (`\u0001`).
    fn worst_text(bytes: usize) -> String {
        "\u{1}".repeat(bytes)
    }

    fn largest_status(name: &str) -> JobStatus {
        let trainer = TrainerStatus {
            id: u64::MAX,
            name: worst_text(TRAINER_NAME_BYTES_MAX),
            last_heartbeat_ms_ago: Some(u64::MAX),
            tasks_done: Some(u64::MAX),
        };
        let checkpoint = CheckpointStatus { step: u64::MAX, created_ms: u64::MAX };
        let pserver = PServerStatus {
            slot: u32::MAX,
            addr: worst_text(PSERVER_ADDR_BYTES_MAX),
            generation: u64::MAX,
            checkpoint: Some(checkpoint),
        };
        let failed = FailedTask { task_id: u64::MAX, reason: worst_text(FAILURE_REASON_BYTES_MAX) };
        JobStatus {
            job: Some(name.to_string()),
            trainers: vec![trainer; TRAINER_COUNT_MAX],
            pservers: vec![pserver; PSERVER_COUNT_MAX as usize],
            failed_tasks: vec![failed; STATE_FAILED_SHOWN_MAX],
            ..JobStatus::default()
        }
    }

    fn summary(job: &str) -> JobSummary {
        JobSummary {
            job: job.to_string(),
            state: JobPhase::Running,
            pass: u32::MAX,
            passes: u32::MAX,
            task_count: u64::MAX,
            done: u64::MAX,
            failed: u64::MAX,
            trainers: u32::MAX,
            pservers: u32::MAX,
            ended_ms_ago: Some(u64::MAX),
            newest_checkpoint: Some(u64::MAX),
            eval: Some((u32::MAX, f32::MAX, f32::MAX)),
            newest_model_checkpoint: Some(u64::MAX),
            reloads_waiting: u32::MAX,
            job_id: u64::MAX,
            newest_checkpoint_data_only: true,
            reload_waits: vec![(u32::MAX, "x".repeat(1024))],
        }
    }

    /// Full rings for every job and a full timeline of slot replacements naming long jobs.
    fn full_history(names: &[String]) -> History {
        let mut history = History::default();
        let steps = (RATE_SAMPLES_MAX + EVALS_MAX + TIMELINE_EVENTS_MAX) as u64;
        for step in 0..steps {
            let jobs = names.iter().enumerate().map(|(id, name)| {
                let job = JobObservation {
                    name: name.clone(),
                    pass: step as u32,
                    task_count: u64::MAX / 2,
                    finished: step,
                    eval: Some((step as u32, f32::MAX, f32::MIN_POSITIVE)),
                    slots: BTreeMap::from([(u32::MAX, u64::MAX - step)]),
                };
                (id as u64, job)
            });
            let seen = Observation { leader_id: Some(u64::MAX), term: step, jobs: jobs.collect() };
            history.observe(u64::MAX - steps + step, &seen);
        }
        history
    }

    /// The view of the largest group (every job at the name limit, every list at the state's
    /// limits, every text made of characters JSON escapes to six bytes, every ring full) stays
    /// below `VIEW_BYTES_MAX`.
    #[test]
    fn largest_view_is_bounded() {
        let names: Vec<String> = (0..JOB_COUNT_MAX)
            .map(|index| format!("{index:02}{}", worst_text(JOB_NAME_BYTES_MAX - 2)))
            .collect();
        let list =
            JobList { jobs: names.iter().map(|name| summary(name)).collect(), retention_ms: 0 };
        let statuses = names.iter().map(|name| largest_status(name)).collect();
        let member = |id: u64| {
            let error = Err(worst_text(FAILURE_REASON_BYTES_MAX));
            let view = Ok(GroupView { term: u64::MAX, ..GroupView::default() });
            let answer = if id.is_multiple_of(2) { error } else { view };
            (id, (worst_text(PSERVER_ADDR_BYTES_MAX), answer))
        };
        let members = (0..MEMBERS_SHOWN_MAX as u64 * 2).map(member).collect();
        // Every trainer of the largest status has the id u64::MAX.
        let rates = names.iter().map(|name| ((name.clone(), u64::MAX), f64::MAX));
        let run = |index: usize| client::RendezvousRun {
            run: format!("{index:02}{}", worst_text(RUN_ID_BYTES_MAX - 2)),
            key_count: u64::MAX,
            bytes: u64::MAX,
            idle_ms: u64::MAX,
            round: Some(client::RendezvousRound {
                round: u64::MAX,
                participants: u64::MAX,
                waiting: u64::MAX,
                complete: true,
            }),
        };
        let fetched = Fetched {
            jobs: Ok((list, statuses)),
            members,
            rendezvous: Ok((0..RUN_COUNT_MAX).map(run).collect()),
            at: Instant::now(),
            trainer_rates: rates.collect(),
        };
        let history = full_history(&names);
        let local = ClusterInfo {
            node_id: 1,
            leader_id: Some(2),
            leader_addr: None,
            term: u64::MAX,
            members: Vec::new(),
            last_log_index: None,
            last_applied_index: None,
            feature_level: u32::MAX,
            membership_index: u64::MAX,
        };
        let answering = Answering { local: &local, history: &history, now_ms: u64::MAX };
        let rendered = render(&answering, &fetched).to_string();
        assert!(rendered.len() <= VIEW_BYTES_MAX, "{} > {VIEW_BYTES_MAX}", rendered.len());
        assert!(rendered.len() > VIEW_BYTES_MAX / 4, "the test no longer builds a large view");
    }
}
