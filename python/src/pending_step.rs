//! `PendingStep` (native): one step of a trainer's walk started on the runtime and left to
//! run there (`TaskClient.step_ahead`), so that asking for a task ahead of the training loop
//! takes no Python thread. A Python thread that waits for an answer takes the interpreter lock
//! from the training thread each time it wakes; a task on the runtime never does. The training
//! thread takes the answer with `result()` when it needs it (at once, usually).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::task::{Context, Poll, Waker};

use client::{ClientError, Step};
use pyo3::prelude::*;
use tokio::task::{JoinError, JoinHandle};

use crate::errors::{guarded, Failure};
use crate::runtime::wait;
use crate::walk_step::WalkStep;

/// What one step of the walk answers: per finished receipt whether it was accepted, the step,
/// and the pass the walk asks for next.
pub type Walked = Result<((Vec<bool>, Step), u32), ClientError>;

/// The step while it runs, and its answer once taken (so `result()` answers alike again).
enum State {
    Running(JoinHandle<Walked>),
    Answered(Py<WalkStep>),
    Failed(Failure),
}

#[pyclass(module = "raftrain._native", frozen)]
pub struct PendingStep {
    state: Mutex<State>,
    /// The client's count of tasks reported done (its heartbeats report it).
    tasks_done: Arc<AtomicU64>,
}

impl PendingStep {
    pub fn new(running: JoinHandle<Walked>, tasks_done: Arc<AtomicU64>) -> Self {
        Self { state: Mutex::new(State::Running(running)), tasks_done }
    }

    /// The state, locked; while another thread holds it (waiting for the answer with the GIL
    /// released), this one waits with the GIL released too, so neither waits for the other.
    fn locked(&self, py: Python<'_>) -> MutexGuard<'_, State> {
        loop {
            match self.state.try_lock() {
                Ok(state) => return state,
                Err(TryLockError::Poisoned(poisoned)) => return poisoned.into_inner(),
                Err(TryLockError::WouldBlock) => py.detach(|| drop(self.state.lock())),
            }
        }
    }
}

#[pymethods]
impl PendingStep {
    /// Whether the answer is in (`result()` then returns at once).
    fn done(&self) -> bool {
        let state = match self.state.try_lock() {
            Ok(state) => state,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            // Another thread is taking the answer: it is not in yet.
            Err(TryLockError::WouldBlock) => return false,
        };
        match &*state {
            State::Running(running) => running.is_finished(),
            State::Answered(_) | State::Failed(_) => true,
        }
    }

    /// The step's answer, waited for with the GIL released if it is not in yet; a failed
    /// step raises its error (each time it is asked).
    fn result(&self, py: Python<'_>) -> PyResult<Py<WalkStep>> {
        guarded("step", || {
            let mut state = self.locked(py);
            let running = match &mut *state {
                State::Answered(step) => return Ok(step.clone_ref(py)),
                State::Failed(failure) => return Err(failure.clone().into()),
                State::Running(running) => running,
            };
            // Interrupted (Ctrl-C), the step stays under way and a later call waits again.
            let joined = match take_finished(running) {
                Some(joined) => joined,
                None => wait(py, running)?,
            };
            let walked = joined
                .map_err(|error| {
                    Failure::new("INTERNAL", format!("the step's task on the runtime: {error}"))
                })
                .and_then(|walked| walked.map_err(Failure::from));
            let walked = match walked {
                Ok(walked) => walked,
                Err(failure) => {
                    *state = State::Failed(failure.clone());
                    return Err(failure.into());
                }
            };
            let step = Py::new(py, walk_step(py, walked, &self.tasks_done)?)?;
            *state = State::Answered(step.clone_ref(py));
            Ok(step)
        })
    }
}

/// The output of `running` if it already finished, taken without waiting (no release of the
/// GIL, no entry into the runtime: an answer asked ahead is usually in by the time it is
/// taken); `None` while it runs.
fn take_finished(running: &mut JoinHandle<Walked>) -> Option<Result<Walked, JoinError>> {
    if !running.is_finished() {
        return None;
    }
    let mut context = Context::from_waker(Waker::noop());
    match Pin::new(running).poll(&mut context) {
        Poll::Ready(joined) => Some(joined),
        Poll::Pending => None,
    }
}

/// A step's answer for Python, its accepted finishes counted in `tasks_done` (the client's
/// count, which its heartbeats report).
pub fn walk_step(
    py: Python<'_>,
    ((accepted, step), pass): ((Vec<bool>, Step), u32),
    tasks_done: &AtomicU64,
) -> PyResult<WalkStep> {
    let done = accepted.iter().filter(|accepted| **accepted).count() as u64;
    tasks_done.fetch_add(done, Ordering::Relaxed);
    WalkStep::new(py, step, pass, accepted)
}
