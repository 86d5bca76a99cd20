//! `TaskSource`: where a [`crate::PassWalker`] asks for tasks, as one trainer (`HandOffSource`:
//! one that reports finished tasks with its ask). Production is
//! a [`Session`] (its `MasterClient`, its trainer id, registering again when the masters forgot
//! it); a harness that records every call (the simulation, the fault harness) wraps its own.

use std::future::Future;
use std::sync::Arc;

use crate::{ClientError, HandOff, Session, TaskOutcome, Together};

/// One trainer's way to ask the masters for tasks.
pub trait TaskSource: Send + Sync {
    /// One `GetTask` for a task of `pass`, as this trainer.
    fn get_task(&self, pass: u32) -> impl Future<Output = Result<TaskOutcome, ClientError>> + Send;

    /// Registers again, the masters having forgotten this trainer (its lease ran out, say
    /// through a long pause); an error when it cannot or must not.
    fn renew(&self) -> impl Future<Output = Result<(), ClientError>> + Send;
}

/// A task source that reports finished tasks with its ask, in one write where the masters can
/// (`MasterClient::finished_then_get_task`).
pub trait HandOffSource: TaskSource {
    /// Reports `finished` (receipts `(task_id, epoch)`), then one `GetTask` for a task of
    /// `pass`, as this trainer; `together` says which asks of its process go with it.
    fn finished_then_get_task(
        &self,
        pass: u32,
        finished: &[(u64, u64)],
        together: &Together,
    ) -> impl Future<Output = Result<HandOff, ClientError>> + Send;
}

impl HandOffSource for Session {
    fn finished_then_get_task(
        &self,
        pass: u32,
        finished: &[(u64, u64)],
        together: &Together,
    ) -> impl Future<Output = Result<HandOff, ClientError>> + Send {
        self.master().finished_then_get_task(self.id(), pass, finished, together)
    }
}

impl<T: HandOffSource> HandOffSource for Arc<T> {
    fn finished_then_get_task(
        &self,
        pass: u32,
        finished: &[(u64, u64)],
        together: &Together,
    ) -> impl Future<Output = Result<HandOff, ClientError>> + Send {
        (**self).finished_then_get_task(pass, finished, together)
    }
}

impl TaskSource for Session {
    fn get_task(&self, pass: u32) -> impl Future<Output = Result<TaskOutcome, ClientError>> + Send {
        self.master().get_task(self.id(), pass)
    }

    async fn renew(&self) -> Result<(), ClientError> {
        Session::renew(self).await.map(drop)
    }
}

impl<T: TaskSource> TaskSource for Arc<T> {
    fn get_task(&self, pass: u32) -> impl Future<Output = Result<TaskOutcome, ClientError>> + Send {
        (**self).get_task(pass)
    }

    fn renew(&self) -> impl Future<Output = Result<(), ClientError>> + Send {
        (**self).renew()
    }
}
