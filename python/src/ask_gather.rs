//! `AskGather` (native): a round of several `TaskClient`s' steps started at once
//! (`TaskClient.step_ahead(together=gather)`), whose asks go to the leader in one `GetTasks`
//! call (`client::AskGather`) instead of one call each.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::errors::{guarded, Failure};

#[pyclass(module = "raftrain._native", frozen)]
pub struct AskGather {
    gather: Arc<client::AskGather>,
}

#[pymethods]
impl AskGather {
    /// A round of `count` steps (from 1 to `ASKS_TOGETHER_MAX`).
    #[new]
    fn new(count: u32) -> PyResult<Self> {
        guarded("AskGather", || {
            let gather = client::AskGather::new(count).map_err(Failure::from)?;
            Ok(Self { gather })
        })
    }

    /// How many steps the round gathers.
    #[getter]
    fn count(&self) -> u32 {
        self.gather.count()
    }

    /// Whether the round's asks went in one call the leader answered (not one call each, as
    /// to masters of an older build).
    #[getter]
    fn answered_in_one_call(&self) -> bool {
        self.gather.answered_in_one_call()
    }
}

impl AskGather {
    /// How a step of this round is sent.
    pub fn together(&self) -> client::Together {
        client::Together::Gathered(self.gather.clone())
    }
}
