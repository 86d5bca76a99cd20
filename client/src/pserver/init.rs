//! The init protocol of `PServerClient`: offer the layout and initial blocks to a slot; the
//! first initializer sends every block and finishes, the others wait until the shard serves
//! (and re-initialize a replacement that came up empty, from the newest values they saw).

use std::time::{Duration, Instant};

use proto::pserver as pb;

use super::error::PServerClientError;
use super::failure::fatal;
use super::pserver_client::{fence, PServerClient, RETRY_MS};
use crate::pserver::conversions::{layout_from_proto, layout_to_proto};
use crate::pserver::layout::{first_difference, JobLayout};

impl PServerClient {
    /// Initializes `slot` from the cached model (a replacement that came up empty).
    pub(super) async fn reinit_slot(
        &self,
        slot: u32,
        layout: &JobLayout,
    ) -> Result<(), PServerClientError> {
        let batches = self
            .cache()
            .batches(slot, layout)
            .ok_or(PServerClientError::NothingToReinit { slot })?;
        tracing::warn!(slot, "pserver slot came up without a checkpoint; re-initializing it from this trainer's latest values");
        self.init_slot(slot, layout, batches).await
    }

    /// Runs the init protocol on one slot until it serves.
    pub(super) async fn init_slot(
        &self,
        slot: u32,
        layout: &JobLayout,
        batches: Vec<Vec<pb::Block>>,
    ) -> Result<(), PServerClientError> {
        let started = Instant::now();
        loop {
            let reply = self.init_request(slot, layout, Vec::new()).await?;
            match pb::InitOutcome::try_from(reply.outcome) {
                Ok(pb::InitOutcome::Accepted) => {
                    return self.send_init(slot, layout, batches).await
                }
                Ok(pb::InitOutcome::Initialized) => {
                    return check_layout(slot, layout, reply.layout)
                }
                Ok(pb::InitOutcome::ByAnother) => check_layout(slot, layout, reply.layout)?,
                _ => {
                    return Err(PServerClientError::Refused {
                        slot,
                        message: format!("unknown init outcome {}", reply.outcome),
                    })
                }
            }
            if started.elapsed() >= self.inner.options.init_wait {
                let waited = self.inner.options.init_wait;
                return Err(PServerClientError::Unavailable {
                    slot,
                    waited,
                    last_error: "another trainer is still initializing it".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(RETRY_MS)).await;
        }
    }

    async fn send_init(
        &self,
        slot: u32,
        layout: &JobLayout,
        batches: Vec<Vec<pb::Block>>,
    ) -> Result<(), PServerClientError> {
        for blocks in batches {
            let reply = self.init_request(slot, layout, blocks).await?;
            if reply.outcome != i32::from(pb::InitOutcome::Accepted) {
                // Taken over (this client was silent too long): the winner finishes it.
                return Box::pin(self.init_slot(slot, layout, Vec::new())).await;
            }
        }
        let initializer = self.inner.initializer;
        self.on_slot(slot, true, |mut route| {
            let request = pb::FinishInitRequest { fence: Some(fence(&route)), initializer };
            async move { route.client.finish_init(request).await }
        })
        .await
        .map_err(|failure| fatal(slot, failure))?;
        tracing::info!(slot, "initialized pserver slot");
        Ok(())
    }

    async fn init_request(
        &self,
        slot: u32,
        layout: &JobLayout,
        blocks: Vec<pb::Block>,
    ) -> Result<pb::InitParamsReply, PServerClientError> {
        let (initializer, layout) = (self.inner.initializer, layout_to_proto(layout));
        self.on_slot(slot, true, |mut route| {
            let request = pb::InitParamsRequest {
                fence: Some(fence(&route)),
                initializer,
                layout: Some(layout.clone()),
                blocks: blocks.clone(),
            };
            async move { route.client.init_params(request).await }
        })
        .await
        .map_err(|failure| fatal(slot, failure))
    }
}

/// The pservers' layout must be this client's.
fn check_layout(
    slot: u32,
    ours: &JobLayout,
    theirs: Option<pb::JobLayout>,
) -> Result<(), PServerClientError> {
    let theirs = layout_from_proto(theirs).map_err(|status| PServerClientError::Refused {
        slot,
        message: status.message().to_string(),
    })?;
    match first_difference(&theirs, ours) {
        Some(difference) => Err(PServerClientError::LayoutMismatch(format!(
            "slot {slot} serves another layout than this client's: {difference}"
        ))),
        None => Ok(()),
    }
}
