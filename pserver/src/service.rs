//! `PServerRpc`: the `raftrain.pserver.v1` service. Every call first checks the lease and the
//! fence (slot and generation), then acts on the shard.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use proto::pserver as pb;
use proto::pserver::p_server_service_server::PServerService;
use tonic::{Request, Response, Status};

use crate::conversions::{blocks_from_proto, fence_from_proto, layout_from_proto, layout_to_proto};
use crate::f32_bytes;
use crate::held_slot::HeldSlot;
use crate::limits::PAYLOAD_BYTES_MAX;
use crate::placement::BlockId;
use crate::shard_cell::{InitAnswer, ShardCell};

/// The service over one held slot's shard.
#[derive(Clone, Debug)]
pub struct PServerRpc {
    cell: Arc<ShardCell>,
    slot: Arc<HeldSlot>,
    checkpoint_step: Arc<AtomicU64>,
}

impl PServerRpc {
    pub fn new(cell: Arc<ShardCell>, slot: Arc<HeldSlot>, checkpoint_step: Arc<AtomicU64>) -> Self {
        Self { cell, slot, checkpoint_step }
    }

    fn admit(&self, fence: Option<pb::Fence>) -> Result<(), Status> {
        let (slot, generation) = fence_from_proto(fence)?;
        Ok(self.slot.admit(slot, generation)?)
    }
}

#[tonic::async_trait]
impl PServerService for PServerRpc {
    async fn init_params(
        &self,
        request: Request<pb::InitParamsRequest>,
    ) -> Result<Response<pb::InitParamsReply>, Status> {
        let request = request.into_inner();
        self.admit(request.fence)?;
        let layout = layout_from_proto(request.layout)?;
        let blocks = blocks_from_proto(&request.blocks);
        let answer = self.cell.init(request.initializer, layout, &blocks, Instant::now())?;
        let (outcome, layout) = match answer {
            InitAnswer::Accepted => (pb::InitOutcome::Accepted, None),
            InitAnswer::ByAnother(layout) => {
                (pb::InitOutcome::ByAnother, Some(layout_to_proto(&layout)))
            }
            InitAnswer::Initialized(layout) => {
                (pb::InitOutcome::Initialized, Some(layout_to_proto(&layout)))
            }
        };
        Ok(Response::new(pb::InitParamsReply { outcome: outcome.into(), layout }))
    }

    async fn finish_init(
        &self,
        request: Request<pb::FinishInitRequest>,
    ) -> Result<Response<pb::FinishInitReply>, Status> {
        let request = request.into_inner();
        self.admit(request.fence)?;
        self.cell.finish(request.initializer)?;
        tracing::info!(
            slot = self.slot.index(),
            initializer = request.initializer,
            "shard initialized; serving"
        );
        Ok(Response::new(pb::FinishInitReply {}))
    }

    async fn push_grads(
        &self,
        request: Request<pb::PushGradsRequest>,
    ) -> Result<Response<pb::PushGradsReply>, Status> {
        let request = request.into_inner();
        self.admit(request.fence)?;
        let shard = self.cell.ready()?;
        let bytes: usize = request.blocks.iter().map(|block| block.values.len()).sum();
        // The optimizer runs on a blocking thread: a large push must not stall the reactor.
        let step =
            tokio::task::spawn_blocking(move || shard.push(&blocks_from_proto(&request.blocks)))
                .await
                .map_err(|error| {
                    Status::internal(format!("applying the push panicked: {error}"))
                })??;
        metrics::counter!("raftrain_pserver_bytes_pushed_total").increment(bytes as u64);
        Ok(Response::new(pb::PushGradsReply { step }))
    }

    async fn pull_params(
        &self,
        request: Request<pb::PullParamsRequest>,
    ) -> Result<Response<pb::PullParamsReply>, Status> {
        let request = request.into_inner();
        self.admit(request.fence)?;
        let shard = self.cell.ready()?;
        let ids: Vec<BlockId> = request
            .blocks
            .into_iter()
            .map(|id| BlockId { name: id.name, index: id.index })
            .collect();
        let bytes = shard.pull_bytes(&ids)?;
        if ids.len() != 1 && bytes > PAYLOAD_BYTES_MAX {
            return Err(Status::invalid_argument(format!(
                "{bytes} bytes in all is over the {PAYLOAD_BYTES_MAX}-byte reply limit: ask for fewer blocks"
            )));
        }
        let copies = shard.pull_with(&ids, f32_bytes::encode)?;
        metrics::counter!("raftrain_pserver_bytes_pulled_total").increment(bytes as u64);
        let blocks = copies
            .into_iter()
            .map(|(id, encoded)| pb::Block {
                name: id.name,
                index: id.index,
                values: encoded.into(),
            })
            .collect();
        Ok(Response::new(pb::PullParamsReply { blocks, step: shard.step() }))
    }

    async fn status(
        &self,
        _request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        self.slot.check()?;
        let (layout, shard, initializing) = self.cell.describe();
        let state = match (&shard, initializing) {
            (Some(_), _) => pb::ShardState::Ready,
            (None, true) => pb::ShardState::Initializing,
            (None, false) => pb::ShardState::Empty,
        };
        let reply = pb::StatusReply {
            slot: self.slot.index(),
            generation: self.slot.generation(),
            state: state.into(),
            layout: layout.as_ref().map(layout_to_proto),
            step: shard.as_ref().map_or(0, |shard| shard.step()),
            block_count: shard.as_ref().map_or(0, |shard| shard.block_count() as u64),
            element_count: shard.as_ref().map_or(0, |shard| shard.element_count()),
            nonfinite_pushes_refused: shard.as_ref().map_or(0, |shard| shard.nonfinite_refused()),
            checkpoint_step: self.checkpoint_step.load(Ordering::SeqCst),
        };
        Ok(Response::new(reply))
    }
}
