//! The report of a run: the schedule, counts of operations by outcome, every violation, the
//! checks that could not decide, and recovery times; written as `report.json`, the history
//! as `history.json`, a text `summary.txt`, and `latency.svg` (each operation's latency over
//! time, fault windows shaded).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::checker::recovery::RecoverySummary;
use crate::checker::{completed, Violation};
use crate::history::{Op, OpKind, Operation, Phase, Value};
use crate::nemesis::Schedule;
use crate::workload::training::TrainingResult;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub seed: u64,
    pub schedule: Schedule,
    /// Operations by kind of call and outcome: `"get-task ok" -> 812`.
    pub counts: BTreeMap<String, u64>,
    /// Fault windows: name, targets, start and stop (ms).
    pub faults: Vec<(String, Vec<u64>, u64, u64)>,
    pub violations: Vec<Violation>,
    pub unknown: Vec<String>,
    pub recovery: RecoverySummary,
    /// The training workload's accuracy against the single-process run, per job (reports of
    /// one-job builds hold one result or none).
    #[serde(default, deserialize_with = "one_or_many")]
    pub training: Vec<TrainingResult>,
    /// Faults injected, by name (and how, where there is more than one way): `"half-open
    /// (proxy-stall)" -> 2`.
    #[serde(default)]
    pub fault_counts: BTreeMap<String, u64>,
    /// Process exits worth reading: graceful stops and their times, excused and masters' own
    /// exits (violations are listed with the others).
    #[serde(default)]
    pub exits: Vec<String>,
    /// Restarted masters back in the group: master, ms taken (`None`: not within the bound).
    #[serde(default)]
    pub rejoins: Vec<(u64, Option<u64>)>,
    /// The membership nemesis's steps, one line each: when, which master, the step, how it
    /// ended, how long it took and what the leader listed.
    #[serde(default)]
    pub membership: Vec<String>,
    pub logs: Vec<PathBuf>,
}

impl Report {
    pub fn new(
        schedule: &Schedule,
        ops: &[Op],
        violations: Vec<Violation>,
        unknown: Vec<String>,
        recovery: RecoverySummary,
    ) -> Self {
        Self {
            seed: schedule.seed,
            schedule: schedule.clone(),
            counts: counts(ops),
            faults: fault_windows(ops),
            violations,
            unknown,
            recovery,
            training: Vec::new(),
            fault_counts: fault_counts(ops),
            exits: Vec::new(),
            rejoins: rejoins(ops),
            membership: crate::checker::membership::summary(ops),
            logs: Vec::new(),
        }
    }

    /// Adds a job's training result; one below its bound is a violation.
    pub fn with_training(mut self, result: TrainingResult) -> Self {
        let job = match result.job.as_str() {
            "" => String::new(),
            job => format!("job {job}: "),
        };
        if !result.model_written {
            let message = format!("{job}no trainer wrote the model: the job did not finish");
            self.violations.push(Violation::new("training", message, Vec::new()));
        } else if !result.within_bound() {
            let message = format!(
                "{job}the trained model's accuracy {:.4} is more than {:.2} below the single-process run's {:.4}",
                result.accuracy, result.bound, result.baseline_accuracy
            );
            self.violations.push(Violation::new("training", message, Vec::new()));
        }
        self.training.push(result);
        self
    }

    /// Whether nothing was found wrong.
    pub fn valid(&self) -> bool {
        self.violations.is_empty()
    }

    /// Writes the report, the history, the summary and the chart under `dir`.
    pub fn write(&self, dir: &Path, ops: &[Op], logs: &[PathBuf]) -> anyhow::Result<()> {
        let mut report = self.clone();
        report.logs = logs.to_vec();
        std::fs::write(dir.join("report.json"), serde_json::to_vec_pretty(&report)?)?;
        std::fs::write(dir.join("history.json"), serde_json::to_vec(ops)?)?;
        std::fs::write(dir.join("summary.txt"), report.summary())?;
        std::fs::write(dir.join("latency.svg"), crate::chart::latency_svg(ops, &self.faults))?;
        Ok(())
    }

    /// The text summary: verdict, seed, counts, faults with recovery, violations.
    pub fn summary(&self) -> String {
        let mut text = String::new();
        let verdict = if self.valid() { "VALID" } else { "INVALID" };
        let _ = writeln!(
            text,
            "{verdict}: {} violations, {} undecided; seed {}",
            self.violations.len(),
            self.unknown.len(),
            self.seed
        );
        let _ = writeln!(text, "operations:");
        for (name, count) in &self.counts {
            let _ = writeln!(text, "  {name:<28} {count}");
        }
        let counts: Vec<String> =
            self.fault_counts.iter().map(|(name, count)| format!("{name} x{count}")).collect();
        let _ = writeln!(text, "faults injected: {}", counts.join(", "));
        let _ = writeln!(text, "faults (to the next dispatch):");
        for (name, start_ms, recovery) in &self.recovery.faults {
            let recovery = recovery.map_or("never".to_string(), |ms| format!("{ms} ms"));
            let _ = writeln!(text, "  {start_ms:>7} ms {name:<16} {recovery}");
        }
        for training in &self.training {
            let job = match training.job.as_str() {
                "" => String::new(),
                job => format!(" (job {job})"),
            };
            let _ = writeln!(
                text,
                "training{job}: accuracy {:.4}, single process {:.4} (bound {:.2})",
                training.accuracy, training.baseline_accuracy, training.bound
            );
        }
        for (master, took) in &self.rejoins {
            let took = took.map_or("not within the bound".to_string(), |ms| format!("in {ms} ms"));
            let _ = writeln!(text, "rejoin: master-{master} back in the group {took}");
        }
        for line in &self.membership {
            let _ = writeln!(text, "membership: {line}");
        }
        for line in &self.exits {
            let _ = writeln!(text, "exit: {line}");
        }
        let recovery = &self.recovery;
        let _ = writeln!(
            text,
            "recovery: p50 {} ms, p99 {} ms, max {} ms",
            recovery.p50_ms, recovery.p99_ms, recovery.max_ms
        );
        for violation in &self.violations {
            let _ = writeln!(
                text,
                "VIOLATION [{}] {} (ops {:?})",
                violation.checker, violation.message, violation.ops
            );
        }
        for unknown in &self.unknown {
            let _ = writeln!(text, "undecided: {unknown}");
        }
        if !self.valid() {
            let _ = writeln!(text, "replay with --seed {}", self.seed);
        }
        text
    }
}

fn counts(ops: &[Op]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for pair in completed(ops) {
        let outcome = match pair.kind() {
            OpKind::Ok => "ok",
            OpKind::Fail => "fail",
            OpKind::Info => "info",
            OpKind::Invoke => "invoke",
        };
        *counts.entry(format!("{} {outcome}", operation_name(&pair.invoke.f))).or_insert(0) += 1;
    }
    counts
}

pub fn operation_name(f: &Operation) -> &'static str {
    match f {
        Operation::Register => "register",
        Operation::GetTask { .. } => "get-task",
        Operation::TaskFinished { .. } => "task-finished",
        Operation::TaskFailed { .. } => "task-failed",
        Operation::Status => "status",
        Operation::Digest { .. } => "digest",
        Operation::PserverStatus { .. } => "pserver-status",
        Operation::Nemesis { .. } => "nemesis",
        Operation::ProcessExit { .. } => "process-exit",
        Operation::Rejoin { .. } => "rejoin",
        Operation::RendezvousAdd => "rendezvous-add",
        Operation::RendezvousCompareVersion { .. } => "rendezvous-compare-version",
        Operation::RendezvousRead => "rendezvous-read",
        Operation::MemberChange { .. } => "member-change",
        Operation::Members => "members",
    }
}

/// Faults started, by name, with how they were injected when the heal says.
fn fault_counts(ops: &[Op]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for op in ops {
        let Operation::Nemesis { fault, phase: Phase::Stop, .. } = &op.f else { continue };
        let name = match &op.value {
            Value::Note { note } => format!("{fault} ({note})"),
            _ => fault.clone(),
        };
        *counts.entry(name).or_insert(0) += 1;
    }
    counts
}

/// Each rejoin's master and time (`None` when it did not rejoin within the bound).
fn rejoins(ops: &[Op]) -> Vec<(u64, Option<u64>)> {
    ops.iter()
        .filter_map(|op| match (&op.f, op.kind, &op.value) {
            (Operation::Rejoin { master }, OpKind::Ok, Value::Elapsed { elapsed_ms }) => {
                Some((*master, Some(*elapsed_ms)))
            }
            (Operation::Rejoin { master }, OpKind::Info, _) => Some((*master, None)),
            _ => None,
        })
        .collect()
}

fn fault_windows(ops: &[Op]) -> Vec<(String, Vec<u64>, u64, u64)> {
    let mut windows = Vec::new();
    let mut open: Option<(String, Vec<u64>, u64)> = None;
    for op in ops {
        if let Operation::Nemesis { fault, targets, phase } = &op.f {
            match phase {
                Phase::Start => open = Some((fault.clone(), targets.clone(), op.time_ms)),
                Phase::Stop => {
                    if let Some((fault, targets, start)) = open.take() {
                        windows.push((fault, targets, start, op.time_ms));
                    }
                }
            }
        }
    }
    windows
}

/// A report's training results: a list, or (reports of one-job builds) one result or null.
fn one_or_many<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<TrainingResult>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        Many(Vec<TrainingResult>),
        One(Option<TrainingResult>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::Many(results) => results,
        OneOrMany::One(result) => result.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of a one-job build (one training result, or null) still reads, as one result
    /// or none; a list reads as it is.
    #[test]
    fn training_results_read_from_either_layout() {
        let result = r#"{"job": "a", "accuracy": 0.9, "baseline_accuracy": 0.91, "bound": 0.02}"#;
        let read = |training: &str| -> Vec<TrainingResult> {
            #[derive(Deserialize)]
            struct Part {
                #[serde(default, deserialize_with = "one_or_many")]
                training: Vec<TrainingResult>,
            }
            let text = format!(r#"{{"training": {training}}}"#);
            serde_json::from_str::<Part>(&text).expect("reads").training
        };
        assert!(read("null").is_empty());
        assert_eq!(read(result).len(), 1);
        let old = read(r#"{"accuracy": 0.9, "baseline_accuracy": 0.91, "bound": 0.02}"#);
        assert_eq!((old[0].job.as_str(), old[0].model_written), ("", true));
        assert_eq!(read(&format!("[{result}, {result}]")).len(), 2);
    }
}
