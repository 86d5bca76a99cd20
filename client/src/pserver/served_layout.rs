//! The layout a job's pservers serve, for a client that did not initialize them: a driver or
//! a new process that evaluates or exports the trained model attaches to the job and pulls
//! without restating the parameters' names and shapes.

use std::time::{Duration, Instant};

use proto::pserver as pb;

use super::error::PServerClientError;
use super::pserver_client::{PServerClient, RETRY_MS};
use crate::pserver::conversions::layout_from_proto;
use crate::pserver::layout::JobLayout;

impl PServerClient {
    /// Waits (for at most `timeout`, if given) until every slot is held and one of them serves
    /// a model, and returns that model's layout; `NotServing` when the wait ends first (no
    /// trainer has initialized the pservers yet).
    pub async fn served_layout(
        &self,
        timeout: Option<Duration>,
    ) -> Result<JobLayout, PServerClientError> {
        let started = Instant::now();
        self.wait_for_slots(timeout).await?;
        loop {
            let ready = self.statuses().await.into_iter().find_map(|(slot, answer)| {
                answer
                    .ok()
                    .filter(|reply| reply.state() == pb::ShardState::Ready)
                    .map(|reply| (slot, reply))
            });
            if let Some((slot, reply)) = ready {
                return layout_from_proto(reply.layout).map_err(|status| {
                    PServerClientError::Refused { slot, message: status.message().to_string() }
                });
            }
            if let Some(waited) = timeout.filter(|timeout| started.elapsed() >= *timeout) {
                return Err(PServerClientError::NotServing { waited });
            }
            tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
        }
    }
}
