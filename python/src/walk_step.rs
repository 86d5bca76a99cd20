//! `WalkStep` and `StepKind` (native): what one ask of `client::PassWalker` met, typed for
//! Python. `TaskClient.step()` answers one; the Python side only decides what to do with a
//! task and how to wait (it sleeps in Python, so Ctrl-C interrupts a wait).

use client::{Step, Waiting, Walked};
use pyo3::prelude::*;

use crate::task::Task;

/// What the walk met: `raftrain._native.StepKind`.
#[pyclass(module = "raftrain._native", eq, eq_int, frozen)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepKind {
    /// A task of the pass walked (`task`).
    Task,
    /// The pass `ended_pass` is over; the walk goes on with `pass_index`.
    PassOver,
    /// The job's pass went back (a restore): the walk goes on with `pass_index`.
    PassRewound,
    /// Nothing is free now (`waiting_for` says why): ask again after `retry_in_s`.
    Wait,
    Finished,
    Cancelled,
}

/// One step of the walk.
#[pyclass(module = "raftrain._native", frozen, get_all)]
pub struct WalkStep {
    pub kind: StepKind,
    pub task: Option<Py<Task>>,
    /// The pass the walk asks for next.
    pub pass_index: u32,
    /// The pass that ended, for `PassOver`.
    pub ended_pass: Option<u32>,
    /// Why nothing is free, for `Wait`: `held_elsewhere` or `no_dataset`.
    pub waiting_for: Option<&'static str>,
    pub retry_in_s: f64,
    /// Per finished receipt the step reported first, whether it was accepted.
    pub finished: Vec<bool>,
}

impl WalkStep {
    /// `step`, after which the walk asks for pass `pass_index`, having reported finished
    /// receipts with the acceptances `finished`.
    pub fn new(py: Python<'_>, step: Step, pass_index: u32, finished: Vec<bool>) -> PyResult<Self> {
        let blank = |kind| WalkStep {
            kind,
            task: None,
            pass_index,
            ended_pass: None,
            waiting_for: None,
            retry_in_s: 0.0,
            finished: finished.clone(),
        };
        Ok(match step {
            Step::Walked(Walked::Task(task)) => {
                WalkStep { task: Some(Py::new(py, Task::from(task))?), ..blank(StepKind::Task) }
            }
            Step::Walked(Walked::PassOver { pass, .. }) => {
                WalkStep { ended_pass: Some(pass), ..blank(StepKind::PassOver) }
            }
            Step::Walked(Walked::PassRewound { .. }) => blank(StepKind::PassRewound),
            Step::Walked(Walked::Finished) => blank(StepKind::Finished),
            Step::Walked(Walked::Cancelled) => blank(StepKind::Cancelled),
            Step::Wait { why, retry_in } => WalkStep {
                waiting_for: Some(match why {
                    Waiting::HeldElsewhere => "held_elsewhere",
                    Waiting::NoDataset => "no_dataset",
                }),
                retry_in_s: retry_in.as_secs_f64(),
                ..blank(StepKind::Wait)
            },
        })
    }
}
