//! How `raftrain status` shows a `Snapshot`: one JSON object (the contract scripts and tests
//! rely on: every key always present, `null` for what is unknown) or text for a person.

use client::{DatasetKind, GroupView, JobList, JobStatus};
use serde_json::{json, Value};

use super::terminal_text::escaped;

/// What one `status` call learned: the linearizable status if a leader answered, and each
/// listed master's own view (or why it did not answer).
pub(crate) struct Snapshot {
    pub status: Option<JobStatus>,
    pub members: Vec<(String, Result<GroupView, String>)>,
    /// Every job of the group, when the leader answered.
    pub jobs: Option<JobList>,
    /// Whether one job was asked for (`--job`): no summary of the others then.
    pub one_job: bool,
    /// The group's torchrun rendezvous runs, when the leader answered.
    pub rendezvous: Option<Vec<client::RendezvousRun>>,
}

/// The `--json` view of a snapshot: the status's keys (from the leader's answer, or empty when
/// none answered) plus `linearizable` and each member's own view.
pub(crate) fn snapshot_json(snapshot: &Snapshot) -> Value {
    let reply = snapshot.status.clone().unwrap_or_else(|| JobStatus {
        group: best_view(snapshot).unwrap_or_default(),
        ..JobStatus::default()
    });
    let mut value = reply.to_json();
    value["linearizable"] = json!(snapshot.status.is_some());
    value["members"] = json!(member_views(&reply, snapshot));
    value["jobs"] = snapshot.jobs.as_ref().map_or(json!([]), |jobs| jobs.to_json()["jobs"].clone());
    let runs = snapshot.rendezvous.as_deref().unwrap_or_default();
    value["rendezvous"] =
        json!(runs.iter().map(client::RendezvousRun::to_json).collect::<Vec<_>>());
    value
}

/// Each member of the group (as the answering node knows it) with its own view.
fn member_views(reply: &JobStatus, snapshot: &Snapshot) -> Vec<Value> {
    reply
        .group
        .members
        .iter()
        .map(|member| {
            let own = snapshot.members.iter().find(|(addr, _)| *addr == member.addr).map(|(_, view)| view);
            let mut value = json!({"id": member.id, "addr": member.addr, "role": member.role, "reachable": false, "term": null, "last_log_index": null, "last_applied_index": null, "feature_level": null});
            if let Some(Ok(view)) = own {
                value["reachable"] = json!(true);
                value["feature_level"] = json!(client::answered_feature_level(view.feature_level));
                value["term"] = json!(view.term);
                value["last_log_index"] = json!(view.last_log_index);
                value["last_applied_index"] = json!(view.last_applied_index);
            }
            value
        })
        .collect()
}

/// Without a leader's answer, the membership as the most advanced reachable member sees it.
fn best_view(snapshot: &Snapshot) -> Option<GroupView> {
    most_advanced(&snapshot.members).cloned()
}

/// The view of the member that answered with the highest term and last log index.
pub(crate) fn most_advanced(members: &[(String, Result<GroupView, String>)]) -> Option<&GroupView> {
    let answered = members.iter().filter_map(|(_, view)| view.as_ref().ok());
    answered.max_by_key(|view| (view.term, view.last_log_index))
}

/// The text view of a snapshot.
pub(crate) fn snapshot_text(snapshot: &Snapshot) -> String {
    let Some(reply) = &snapshot.status else {
        let mut out = "no leader answered: no quorum, or the group is electing. Each reachable master's own view (not linearizable):\n".to_string();
        for (addr, view) in &snapshot.members {
            out += &match view {
                Ok(view) => format!(
                    "  {}: node {}, term {}, knows leader {}, last log {}, applied {}\n",
                    escaped(addr),
                    view.node_id,
                    view.term,
                    view.leader_id.unwrap_or(0),
                    view.last_log_index,
                    view.last_applied_index
                ),
                Err(reason) => {
                    format!("  {}: unreachable ({})\n", escaped(addr), escaped(reason))
                }
            };
        }
        return out;
    };
    let text = to_text(reply, &member_views(reply, snapshot)) + &rendezvous_text(snapshot);
    match &snapshot.jobs {
        // Several jobs and none asked for: the group, then every job.
        Some(jobs) if !snapshot.one_job && jobs.jobs.len() > 1 => {
            let group_lines = text.lines().take_while(|line| !line.starts_with("job "));
            let mut out: String = group_lines.map(|line| format!("{line}\n")).collect();
            out += &crate::job::jobs_table(jobs);
            out += "(raftrain status --job NAME shows one)\n";
            out
        }
        _ => text,
    }
}

/// The rendezvous runs, when the group holds any.
fn rendezvous_text(snapshot: &Snapshot) -> String {
    match snapshot.rendezvous.as_deref() {
        Some(runs) if !runs.is_empty() => {
            let mut out = format!("torchrun rendezvous runs: {}\n", runs.len());
            for run in runs {
                let round = run.round.as_ref().map_or(String::new(), |round| format!("{round}, "));
                out += &format!(
                    "  {}: {round}{} keys, {} bytes, last written {:.1} s ago\n",
                    escaped(&run.run),
                    run.key_count,
                    run.bytes,
                    run.idle_ms as f64 / 1000.0
                );
            }
            out
        }
        _ => String::new(),
    }
}

fn to_text(reply: &JobStatus, members: &[Value]) -> String {
    let mut out = group_text(&reply.group, members);
    let job = match &reply.job {
        None => "(no dataset reported yet)".to_string(),
        Some(job) => escaped(job),
    };
    out += &format!(
        "job {job}: pass {} of {}{}\n",
        reply.pass + 1,
        reply.passes.max(1),
        finished(reply)
    );
    if let Some(kind) = reply.dataset {
        out += &dataset_line(kind);
    }
    out += &format!(
        "tasks: {} todo, {} pending, {} done, {} failed\n",
        reply.todo, reply.pending, reply.done, reply.failed
    );
    for task in &reply.failed_tasks {
        out += &format!("  failed task {}: {}\n", task.task_id, escaped(&task.reason));
    }
    out += &members_text(reply);
    if let Some(eval) = &reply.eval {
        out += &format!(
            "eval after pass {}: loss {:.4}, accuracy {:.4}\n",
            eval.pass, eval.loss, eval.accuracy
        );
    }
    out
}

/// The leader and each master's progress.
fn group_text(group: &GroupView, members: &[Value]) -> String {
    let leader = match group.leader_id {
        None => "none".to_string(),
        Some(id) => format!("{id} ({})", escaped(group.leader_addr.as_deref().unwrap_or(""))),
    };
    let level = group.group_feature_level;
    let mut out = format!("leader {leader}, term {}, feature level {level}\n", group.term);
    for member in members {
        let progress = match member["reachable"].as_bool() {
            Some(true) => format!(
                "last log {}, applied {}, decodes level {}",
                member["last_log_index"], member["last_applied_index"], member["feature_level"]
            ),
            _ => "unreachable".to_string(),
        };
        out += &format!(
            "  master {} {} {}: {progress}\n",
            member["id"],
            escaped(member["addr"].as_str().unwrap_or("")),
            escaped(member["role"].as_str().unwrap_or(""))
        );
    }
    out
}

/// The job's trainers and pservers, one line each.
fn members_text(reply: &JobStatus) -> String {
    let mut out = format!("trainers: {}\n", reply.trainers.len());
    for trainer in &reply.trainers {
        let heard = trainer.last_heartbeat_ms_ago.map_or_else(
            || "not heard since the leader took over".to_string(),
            |ago| format!("heard {ago} ms ago"),
        );
        let done =
            trainer.tasks_done.map_or_else(String::new, |done| format!(", {done} tasks done"));
        out += &format!("  trainer {} {}: {heard}{done}\n", trainer.id, escaped(&trainer.name));
    }
    out += &format!("pservers: {} of {}\n", reply.pservers.len(), reply.pservers_desired);
    for pserver in &reply.pservers {
        let checkpoint = pserver.checkpoint.map_or_else(
            || "no checkpoint yet".to_string(),
            |checkpoint| format!("checkpoint at step {}", checkpoint.step),
        );
        out += &format!(
            "  pserver {} {} (generation {}): {checkpoint}\n",
            pserver.slot,
            escaped(&pserver.addr),
            pserver.generation
        );
    }
    out
}

/// What the job's tasks cover: an index job's size and shard size.
fn dataset_line(kind: DatasetKind) -> String {
    match kind {
        DatasetKind::RecordIo => "dataset: RecordIO files\n".to_string(),
        DatasetKind::IndexRange { size, shard_size } => {
            format!("dataset: index range, size {size}, shard size {shard_size}\n")
        }
    }
}

fn finished(reply: &JobStatus) -> &'static str {
    if reply.job_finished {
        " (job finished)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use client::{FailedTask, TrainerStatus};

    /// Control characters and bidi overrides in names and reasons (ESC, an OSC title
    /// sequence, CR, NUL, a newline, U+202E) reach the terminal escaped: the text view has
    /// exactly its own lines, no raw control character, and the JSON view keeps the bytes.
    #[test]
    fn text_escapes_control_characters_from_the_master() {
        let hostile =
            "a\u{1b}[2J\u{1b}]0;owned\u{7}b\rc\0d\ntrainer 9 forged: heard 1 ms ago\u{202e}e";
        let trainer = TrainerStatus { id: 1, name: hostile.to_string(), ..Default::default() };
        let failed = FailedTask { task_id: 2, reason: hostile.to_string() };
        let reply = JobStatus {
            job: Some(hostile.to_string()),
            trainers: vec![trainer],
            failed_tasks: vec![failed],
            ..Default::default()
        };
        let text = to_text(&reply, &[]);
        assert_eq!(text.lines().count(), 7, "{text}");
        let raw = |c: char| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c);
        assert!(!text.chars().any(raw), "{text:?}");
        assert!(text.contains(r"a\x1b[2J\x1b]0;owned\x07b\rc\0d\ntrainer 9"), "{text}");
        assert!(text.contains(r"\u{202e}e"), "{text}");
        assert_eq!(reply.to_json()["trainers"][0]["name"], json!(hostile));
    }

    /// The text view says what the job's tasks cover: an index job's size and shard size.
    #[test]
    fn text_shows_an_index_jobs_size_and_shard_size() {
        let kind = DatasetKind::IndexRange { size: 1_000_003, shard_size: 1000 };
        let reply = JobStatus { job: Some("j".into()), dataset: Some(kind), ..Default::default() };
        let text = to_text(&reply, &[]);
        assert!(text.contains("dataset: index range, size 1000003, shard size 1000\n"), "{text}");
        let reply = JobStatus { dataset: Some(DatasetKind::RecordIo), ..reply };
        assert!(to_text(&reply, &[]).contains("dataset: RecordIO files\n"));
    }
}
