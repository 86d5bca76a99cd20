//! `InFlight`: one exchange with the pservers (a push, then a pull) running as its own task, so
//! the trainer computes its next batch meanwhile. The pull is sent after the push is answered
//! (or with it, `PServerClient::exchange`), so it sees it: parameters pulled by an exchange
//! hold every gradient this trainer pushed up to and including that exchange's.

use std::sync::Arc;

use anyhow::Context as _;
use client::pserver::layout::JobLayout;
use client::pserver::{PServerClient, PServerClientError};
use tokio::task::JoinHandle;

use crate::model::Params;

/// What an exchange did: the push's outcome and, if it pulled, the buffer it pulled into.
pub struct Exchanged {
    pub pushed: Result<(), PServerClientError>,
    pub pulled: Option<Result<Arc<Params>, PServerClientError>>,
    /// The gradient held NaN or an infinity and was not pushed.
    pub nonfinite_dropped: bool,
}

/// Gradients summed over some batches, and how many.
pub type Accumulated = (Params, usize);

/// An exchange under way.
pub struct InFlight {
    task: JoinHandle<Exchanged>,
}

impl InFlight {
    /// Starts pushing the average of `accumulated` (if any, and if it is finite), then pulling
    /// into `pull_into` (if given; its buffers are reused when they fit the layout). The
    /// averaging and the check run in the task too, off the path of the next batch.
    pub fn start(
        pservers: &PServerClient,
        layout: &Arc<JobLayout>,
        accumulated: Option<Accumulated>,
        pull_into: Option<Params>,
    ) -> Self {
        let (pservers, layout) = (pservers.clone(), layout.clone());
        let task = tokio::spawn(async move {
            let gradient = accumulated.map(averaged);
            let nonfinite_dropped = gradient.as_ref().is_some_and(Option::is_none);
            let gradient = gradient.flatten().map(Arc::new);
            let (pushed, pulled) = match (gradient, pull_into) {
                (gradient, Some(params)) => {
                    match pservers.exchange(&layout, gradient, params).await {
                        Ok(exchanged) => (exchanged.pushed, Some(Ok(exchanged.pulled))),
                        Err(error) => (Ok(()), Some(Err(error))),
                    }
                }
                (Some(gradient), None) => (pservers.push_shared(&layout, gradient).await, None),
                (None, None) => (Ok(()), None),
            };
            Exchanged { pushed, pulled, nonfinite_dropped }
        });
        Self { task }
    }

    /// Waits for the exchange to end.
    pub async fn finish(self) -> anyhow::Result<Exchanged> {
        self.task.await.context("an exchange with the pservers panicked")
    }
}

/// The summed gradient averaged over its batches, or `None` if it is not finite: a diverging
/// model yields NaN or infinite gradients, which the pservers would refuse (and count).
fn averaged((mut sum, count): Accumulated) -> Option<Params> {
    if count > 1 {
        let scale = 1.0 / count as f32;
        sum.values_mut().flatten().for_each(|value| *value *= scale);
    }
    sum.values().flatten().all(|value| value.is_finite()).then_some(sum)
}
