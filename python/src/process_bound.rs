//! `ProcessBound`: the process an object's connections belong to. A client's channels run on
//! the runtime of the process that made it; a forked child (a DataLoader worker) that used an
//! inherited client would wait for ever, so it is told to make its own instead.

use crate::errors::Failure;

#[derive(Debug, Clone, Copy)]
pub struct ProcessBound {
    pid: u32,
}

impl ProcessBound {
    pub fn here() -> Self {
        Self { pid: std::process::id() }
    }

    /// Fails unless called in the process that made the object.
    pub fn check(&self, what: &str) -> Result<(), Failure> {
        let pid = std::process::id();
        if pid == self.pid {
            return Ok(());
        }
        Err(Failure::new(
            "FAILED_PRECONDITION",
            format!(
                "this {what} was made in process {} and cannot be used in process {pid} (a \
                 forked child, such as a DataLoader worker): make a new one in this process",
                self.pid
            ),
        ))
    }
}
