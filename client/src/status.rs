//! What `MasterClient::status` and `member_info` answer, typed: a master group as one member
//! sees it ([`GroupView`]) and the job as the leader sees it ([`JobStatus`]), with the JSON
//! form `raftrain status --json` and the Python package print ([`JobStatus::to_json`]).

use serde_json::{json, Value};

use crate::types::ChunkRef;

/// One master's view of the group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupView {
    /// The answering master.
    pub node_id: u64,
    /// The leader it knows, if any, and its client address.
    pub leader_id: Option<u64>,
    pub leader_addr: Option<String>,
    pub term: u64,
    pub members: Vec<Member>,
    pub last_log_index: u64,
    pub last_applied_index: u64,
    /// The newest feature level the answering master decodes and admits (0: a build before
    /// feature levels, which decodes level 1).
    pub feature_level: u32,
    /// The group's feature level, as the answering master's applied state says (0: not said).
    pub group_feature_level: u32,
}

/// The feature level a master's `feature_level` answer stands for: builds before feature
/// levels answer 0 and decode level 1.
pub fn answered_feature_level(answer: u32) -> u32 {
    answer.max(1)
}

/// A member of the group: its id, client address and role (`leader`, `follower`, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    pub addr: String,
    pub role: String,
}

/// The job as the leader sees it (a linearizable read).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobStatus {
    /// The group as the answering leader sees it.
    pub group: GroupView,
    /// The job's name; `None` until a dataset is reported.
    pub job: Option<String>,
    /// What the job's dataset is; `None` until a dataset is reported.
    pub dataset: Option<DatasetKind>,
    /// The running pass (from 0) and how many the job runs.
    pub pass: u32,
    pub passes: u32,
    /// Tasks by queue in the running pass.
    pub todo: u64,
    pub pending: u64,
    pub done: u64,
    pub failed: u64,
    /// The first failed tasks by id (`failed` is the full count).
    pub failed_tasks: Vec<FailedTask>,
    pub trainers: Vec<TrainerStatus>,
    pub pservers_desired: u32,
    /// The held pserver slots.
    pub pservers: Vec<PServerStatus>,
    /// The newest evaluation a trainer recorded.
    pub eval: Option<EvalStatus>,
    pub job_finished: bool,
    /// The job was cancelled.
    pub job_cancelled: bool,
    /// Tasks handed out over the whole job, retries included.
    pub dispatched: u64,
    /// The first chunk of a RecordIO dataset (`None` before a report, for an index dataset,
    /// and from older masters): what a trainer joining without `--dataset` reads its feature
    /// count from. Not in the `--json` view: it is for trainers, not people.
    pub first_chunk: Option<ChunkRef>,
}

/// What a job's dataset is, as status shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatasetKind {
    /// RecordIO files the masters scanned; tasks are runs of chunks.
    RecordIo,
    /// The indices `[0, size)`, in tasks of `shard_size` indices (the last possibly shorter).
    IndexRange { size: u64, shard_size: u64 },
}

impl DatasetKind {
    /// The kind's name in the `--json` view.
    pub fn name(&self) -> &'static str {
        match self {
            DatasetKind::RecordIo => "recordio",
            DatasetKind::IndexRange { .. } => "index_range",
        }
    }
}

/// A task that failed for good in the running pass, and the last reason given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailedTask {
    pub task_id: u64,
    pub reason: String,
}

/// A registered trainer; the heartbeat and task figures are the leader's soft state (absent
/// right after a leader change until the trainer's next heartbeat).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrainerStatus {
    pub id: u64,
    pub name: String,
    pub last_heartbeat_ms_ago: Option<u64>,
    pub tasks_done: Option<u64>,
}

/// A held pserver slot and its newest recorded checkpoint (step and creation time), if any.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PServerStatus {
    pub slot: u32,
    pub addr: String,
    pub generation: u64,
    pub checkpoint: Option<CheckpointStatus>,
}

/// A recorded checkpoint as status shows it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointStatus {
    pub step: u64,
    pub created_ms: u64,
}

/// An evaluation: after which pass, its loss and accuracy.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EvalStatus {
    pub pass: u32,
    pub loss: f32,
    pub accuracy: f32,
}

impl JobStatus {
    /// The `--json` contract: every key always present, `null` for what is unknown.
    pub fn to_json(&self) -> Value {
        let group = &self.group;
        let members: Vec<Value> = group
            .members
            .iter()
            .map(|member| json!({"id": member.id, "addr": member.addr, "role": member.role}))
            .collect();
        json!({
            "leader": group.leader_id,
            "leader_addr": group.leader_addr,
            "term": group.term,
            "feature_level": group.group_feature_level,
            "members": members,
            "job": self.job,
            "dataset_kind": self.dataset.map(|kind| kind.name()),
            "dataset_size": self.index_range().map(|(size, _)| size),
            "shard_size": self.index_range().map(|(_, shard_size)| shard_size),
            "pass": self.pass,
            "passes": self.passes,
            "todo": self.todo,
            "pending": self.pending,
            "done": self.done,
            "failed": self.failed,
            "failed_tasks": self.failed_tasks.iter().map(FailedTask::to_json).collect::<Vec<_>>(),
            "trainers": self.trainers.iter().map(TrainerStatus::to_json).collect::<Vec<_>>(),
            "pservers_desired": self.pservers_desired,
            "pservers": self.pservers.iter().map(PServerStatus::to_json).collect::<Vec<_>>(),
            "eval": self.eval.map(|eval| json!({"pass": eval.pass, "loss": eval.loss, "accuracy": eval.accuracy})),
            "job_finished": self.job_finished,
            "job_cancelled": self.job_cancelled,
            "dispatched": self.dispatched,
        })
    }
}

impl JobStatus {
    /// An index dataset's `(size, shard_size)`; `None` for RecordIO or before a report.
    pub fn index_range(&self) -> Option<(u64, u64)> {
        match self.dataset? {
            DatasetKind::IndexRange { size, shard_size } => Some((size, shard_size)),
            DatasetKind::RecordIo => None,
        }
    }
}

impl FailedTask {
    fn to_json(&self) -> Value {
        json!({"task": self.task_id, "reason": self.reason})
    }
}

impl TrainerStatus {
    fn to_json(&self) -> Value {
        json!({"id": self.id, "name": self.name, "last_heartbeat_ms_ago": self.last_heartbeat_ms_ago, "tasks_done": self.tasks_done})
    }
}

impl PServerStatus {
    fn to_json(&self) -> Value {
        let step = self.checkpoint.map(|checkpoint| checkpoint.step);
        let created_ms = self.checkpoint.map(|checkpoint| checkpoint.created_ms);
        json!({"index": self.slot, "addr": self.addr, "generation": self.generation, "checkpoint_step": step, "checkpoint_created_ms": created_ms})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON view has every contract key, with null for what is unknown: the dataset's
    /// kind before a report, its size and shard size unless it is an index range.
    #[test]
    fn json_has_every_contract_key() {
        let empty = JobStatus::default().to_json();
        for key in [
            "leader",
            "leader_addr",
            "term",
            "members",
            "job",
            "dataset_kind",
            "dataset_size",
            "shard_size",
            "pass",
            "passes",
            "todo",
            "pending",
            "done",
            "failed",
            "failed_tasks",
            "trainers",
            "pservers_desired",
            "pservers",
            "eval",
            "job_finished",
            "job_cancelled",
            "dispatched",
        ] {
            assert!(empty.get(key).is_some(), "missing {key}");
        }
        assert_eq!(empty["leader"], Value::Null);
        assert_eq!(empty["job"], Value::Null);
        assert_eq!(empty["eval"], Value::Null);
        let member = Member { id: 2, addr: "127.0.0.1:7002".into(), role: "leader".into() };
        let group =
            GroupView { leader_id: Some(2), term: 5, members: vec![member], ..Default::default() };
        let pserver = PServerStatus {
            slot: 1,
            checkpoint: Some(CheckpointStatus { step: 7, created_ms: 9 }),
            ..Default::default()
        };
        let full =
            JobStatus { group, todo: 3, pservers: vec![pserver], ..Default::default() }.to_json();
        assert_eq!(full["leader"], json!(2));
        assert_eq!(full["members"][0]["role"], json!("leader"));
        assert_eq!(full["todo"], json!(3));
        assert_eq!(full["pservers"][0]["checkpoint_step"], json!(7));
        assert_eq!(full["pservers"][0]["checkpoint_created_ms"], json!(9));
        assert_eq!((&full["dataset_kind"], &full["dataset_size"]), (&Value::Null, &Value::Null));
        let recordio = JobStatus { dataset: Some(DatasetKind::RecordIo), ..Default::default() };
        let recordio = recordio.to_json();
        assert_eq!(recordio["dataset_kind"], json!("recordio"));
        assert_eq!(
            (&recordio["dataset_size"], &recordio["shard_size"]),
            (&Value::Null, &Value::Null)
        );
        let kind = DatasetKind::IndexRange { size: 1001, shard_size: 100 };
        let index = JobStatus { dataset: Some(kind), ..Default::default() }.to_json();
        assert_eq!(index["dataset_kind"], json!("index_range"));
        assert_eq!((&index["dataset_size"], &index["shard_size"]), (&json!(1001), &json!(100)));
    }
}
