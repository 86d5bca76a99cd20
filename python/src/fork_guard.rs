//! What a forked child must not inherit held. A DataLoader worker is forked while the parent's
//! runtime threads run (heartbeats, a watch); a lock one of them held at that instant stays
//! held for ever in the child, where that thread does not exist. Most locks belong to objects
//! the child never touches (it makes its own runtime and clients: `runtime.rs`,
//! `process_bound.rs`), and tokio is built without parking_lot, whose process-wide parking
//! table was such a lock (the root Cargo.toml). What remains process-wide is standard error and
//! the queue the runtime's threads put log events in (`log_forward.rs`): the package registers
//! these functions with `os.register_at_fork`, so the forking thread holds both across the fork
//! and both processes get them back free (the child's queue emptied: the parent forwards what
//! was in it).

use std::cell::RefCell;
use std::io::StderrLock;
use std::sync::MutexGuard;

use pyo3::pyfunction;

use crate::log_forward::{self, Queue};

/// What the forking thread holds across a fork.
type Held = (StderrLock<'static>, MutexGuard<'static, Queue>);

thread_local! {
    /// Standard error's lock and the log queue's, held by the forking thread from just before
    /// the fork.
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

/// Before `fork`, in the forking thread: waits for a line being written and an event being
/// queued to end, then holds both until [`after_fork`] or [`after_fork_in_child`].
/// The GIL stays held: the runtime's threads log without it.
#[pyfunction]
pub fn before_fork() {
    let held = (std::io::stderr().lock(), log_forward::hold_queue());
    HELD.with(|slot| *slot.borrow_mut() = Some(held));
}

/// After `fork`, in the parent: lets both go.
#[pyfunction]
pub fn after_fork() {
    HELD.with(|held| drop(held.borrow_mut().take()));
}

/// After `fork`, in the child (the same thread as in the parent): empties the log queue, whose
/// events the parent forwards, and lets both go.
#[pyfunction]
pub fn after_fork_in_child() {
    HELD.with(|slot| {
        if let Some((stderr, mut queue)) = slot.borrow_mut().take() {
            log_forward::forget_queued(&mut queue);
            drop((queue, stderr));
        }
    });
}
