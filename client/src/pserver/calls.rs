//! The data plane's requests from `PServerClient`, one slot and one batch each: a push, a pull,
//! and a push with the pull after it (`PushPull`), each sent through `platform::unary::call`
//! and retried as `on_slot` says (a push only where it surely was not applied); a slot that
//! came up empty is re-initialized once from this client's cache and the request sent again.

use std::future::Future;

use platform::unary::{call, small_message};
use proto::pserver as pb;
use proto::Message as _;
use tonic::Status;

use super::error::PServerClientError;
use super::failure::Failure;
use super::pserver_client::{fence, push_fence, CachedBlock, PServerClient};
use super::routes::Route;
use crate::pserver::data_plane::{pull_message, push_message, SMALL_MESSAGE_BYTES_MAX};
use crate::pserver::data_plane::{PULL_PARAMS_PATH, PUSH_GRADS_PATH, PUSH_PULL_PATH};
use crate::pserver::layout::JobLayout;
use crate::pserver::limits::MESSAGE_BYTES_MAX;
use crate::pserver::placement::BlockId;

impl PServerClient {
    /// Applies one batch of blocks, computed on values of model restore `basis`, on `slot`, at
    /// most once.
    pub(super) async fn push_batch(
        &self,
        slot: u32,
        layout: &JobLayout,
        blocks: Vec<pb::Block>,
        basis: Option<u64>,
    ) -> Result<(), PServerClientError> {
        let attempt = |mut route: Route| {
            let message = push_message::encode(push_fence(&route, basis), &blocks, &[]);
            async move {
                let reply =
                    call(&mut route.channel, PUSH_GRADS_PATH, message, SMALL_MESSAGE_BYTES_MAX)
                        .await?;
                let reply = pb::PushGradsReply::decode(reply)
                    .map_err(|error| Status::internal(format!("the PushGrads reply: {error}")))?;
                Ok(tonic::Response::new(reply))
            }
        };
        self.with_reinit(slot, layout, false, attempt).await.map(drop)
    }

    /// Copies of `ids` from `slot`, each block's values left in the frames they arrived in,
    /// and the model restore the slot's shard is of.
    pub(super) async fn pull_batch(
        &self,
        slot: u32,
        layout: &JobLayout,
        ids: Vec<BlockId>,
    ) -> Result<(u32, Vec<CachedBlock>, u64), PServerClientError> {
        let ids = ids_to_proto(ids);
        let attempt = |mut route: Route| {
            let request = pb::PullParamsRequest { fence: Some(fence(&route)), blocks: ids.clone() };
            let message = small_message(&request);
            async move {
                let reply =
                    call(&mut route.channel, PULL_PARAMS_PATH, message, MESSAGE_BYTES_MAX).await?;
                Ok(tonic::Response::new(pull_message::decode(reply)?))
            }
        };
        let reply = self.with_reinit(slot, layout, true, attempt).await?;
        Ok((slot, reply.blocks, reply.model_restore))
    }

    /// Applies `blocks` (computed on values of model restore `basis`) on `slot` at most once,
    /// then copies `ids`, in one round trip; the copies and the restore the shard is of.
    pub(super) async fn push_pull_batch(
        &self,
        slot: u32,
        layout: &JobLayout,
        (blocks, basis): (Vec<pb::Block>, Option<u64>),
        ids: Vec<BlockId>,
    ) -> Result<(Vec<CachedBlock>, u64), PServerClientError> {
        let ids = ids_to_proto(ids);
        let attempt = |mut route: Route| {
            let message = push_message::encode(push_fence(&route, basis), &blocks, &ids);
            async move {
                let reply =
                    call(&mut route.channel, PUSH_PULL_PATH, message, MESSAGE_BYTES_MAX).await?;
                Ok(tonic::Response::new(pull_message::decode(reply)?))
            }
        };
        let reply = self.with_reinit(slot, layout, false, attempt).await?;
        Ok((reply.blocks, reply.model_restore))
    }

    /// `on_slot`, and once more after re-initializing a slot that came up empty.
    async fn with_reinit<T, F, Fut>(
        &self,
        slot: u32,
        layout: &JobLayout,
        idempotent: bool,
        mut attempt: F,
    ) -> Result<T, PServerClientError>
    where
        F: FnMut(Route) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut reinitialized = false;
        loop {
            match self.on_slot(slot, idempotent, &mut attempt).await {
                Ok(value) => return Ok(value),
                Err(Failure::NotInitialized) if !reinitialized => {
                    self.reinit_slot(slot, layout).await?;
                    reinitialized = true;
                }
                Err(Failure::NotInitialized) => {
                    return Err(PServerClientError::Refused {
                        slot,
                        message: "still not initialized after re-initializing it".into(),
                    })
                }
                Err(Failure::Fatal(error)) => return Err(error),
                Err(Failure::Retry(_)) => unreachable!("on_slot retries these itself"),
            }
        }
    }
}

fn ids_to_proto(ids: Vec<BlockId>) -> Vec<pb::BlockId> {
    ids.into_iter().map(|id| pb::BlockId { name: id.name, index: id.index }).collect()
}
