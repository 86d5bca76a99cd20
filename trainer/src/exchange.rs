//! `InFlight`: one exchange with the pservers (a push, then a pull) running as its own task, so
//! the trainer computes its next batch meanwhile. The pull is sent after the push is answered
//! (or with it, `PServerClient::exchange`), so it sees it: parameters pulled by an exchange
//! hold every gradient this trainer pushed up to and including that exchange's.

use std::sync::Arc;

use anyhow::Context as _;
use pserver::client::{PServerClient, PServerClientError};
use pserver::layout::JobLayout;
use tokio::task::JoinHandle;

use crate::model::Params;

/// What an exchange did: the push's outcome and, if it pulled, the buffer it pulled into.
pub struct Exchanged {
    pub pushed: Result<(), PServerClientError>,
    pub pulled: Option<Result<Params, PServerClientError>>,
}

/// An exchange under way.
pub struct InFlight {
    task: JoinHandle<Exchanged>,
}

impl InFlight {
    /// Starts pushing `gradient` (if any), then pulling into `pull_into` (if given; its
    /// buffers are reused when they fit the layout).
    pub fn start(
        pservers: &PServerClient,
        layout: &Arc<JobLayout>,
        gradient: Option<Arc<Params>>,
        pull_into: Option<Params>,
    ) -> Self {
        let (pservers, layout) = (pservers.clone(), layout.clone());
        let task = tokio::spawn(async move {
            match (gradient, pull_into) {
                (gradient, Some(mut params)) => {
                    match pservers.exchange(&layout, gradient, &mut params).await {
                        Ok(pushed) => Exchanged { pushed, pulled: Some(Ok(params)) },
                        Err(error) => Exchanged { pushed: Ok(()), pulled: Some(Err(error)) },
                    }
                }
                (Some(gradient), None) => Exchanged {
                    pushed: pservers.push_shared(&layout, gradient).await,
                    pulled: None,
                },
                (None, None) => Exchanged { pushed: Ok(()), pulled: None },
            }
        });
        Self { task }
    }

    /// Waits for the exchange to end.
    pub async fn finish(self) -> anyhow::Result<Exchanged> {
        self.task.await.context("an exchange with the pservers panicked")
    }
}
