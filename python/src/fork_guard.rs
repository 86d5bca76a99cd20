//! What a forked child must not inherit held. A DataLoader worker is forked while the parent's
//! runtime threads run (heartbeats, a watch); a lock one of them held at that instant stays
//! held for ever in the child, where that thread does not exist. Most locks belong to objects
//! the child never touches (it makes its own runtime and clients: `runtime.rs`,
//! `process_bound.rs`), and tokio is built without parking_lot, whose process-wide parking
//! table was such a lock (the root Cargo.toml). What remains process-wide is standard error,
//! which the runtime's threads write log lines to: the package registers these two functions
//! with `os.register_at_fork`, so the forking thread holds it across the fork and both
//! processes get it back free.

use std::cell::RefCell;
use std::io::StderrLock;

use pyo3::pyfunction;

thread_local! {
    /// Standard error's lock, held by the forking thread from just before the fork.
    static HELD: RefCell<Option<StderrLock<'static>>> = const { RefCell::new(None) };
}

/// Before `fork`, in the forking thread: waits for a log line being written to end, then
/// holds standard error until [`after_fork`].
/// The GIL stays held: the runtime's threads write their lines without it.
#[pyfunction]
pub fn before_fork() {
    let lock = std::io::stderr().lock();
    HELD.with(|held| *held.borrow_mut() = Some(lock));
}

/// After `fork`, in the parent and in the child (the same thread in both): lets standard
/// error go.
#[pyfunction]
pub fn after_fork() {
    HELD.with(|held| drop(held.borrow_mut().take()));
}
