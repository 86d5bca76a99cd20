//! `PServerRpc`: the `raftrain.pserver.v1` service. Every call first checks the lease and the
//! fence (slot and generation), then acts on the shard. Pushes and pulls come in through the
//! data plane (`data_plane/server.rs`) as well as through the generated service; both end in
//! [`PServerRpc::push_blocks`] and [`PServerRpc::pull_blocks`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use proto::pserver as pb;
use proto::pserver::p_server_service_server::PServerService;
use tokio::sync::OwnedRwLockReadGuard;
use tonic::{Request, Response, Status};

use crate::buffer_pool::BufferPool;
use crate::conversions::{
    blocks_from_proto, fence_from_proto, ids_from_proto, layout_from_proto, layout_to_proto,
};
use crate::held_slot::HeldSlot;
use crate::limits::{INLINE_PUSH_BYTES_MAX, PAYLOAD_BYTES_MAX, PULL_BUFFER_BYTES_MAX};
use crate::payload::Payload;
use crate::placement::BlockId;
use crate::shard::Shard;
use crate::shard_cell::{InitAnswer, ShardCell};

pub use crate::data_plane::pull_message::PullStamp;

/// What a pull of `shard` at `step` says besides its blocks.
fn stamp_of(shard: &Shard, step: u64) -> PullStamp {
    PullStamp { step, model_restore: shard.model_restore() }
}

/// The service over one held slot's shard.
#[derive(Clone, Debug)]
pub struct PServerRpc {
    cell: Arc<ShardCell>,
    held: Arc<HeldSlot>,
    checkpoint_step: Arc<AtomicU64>,
    /// What pulls are encoded into.
    buffers: Arc<BufferPool>,
}

impl PServerRpc {
    pub fn new(cell: Arc<ShardCell>, held: Arc<HeldSlot>, checkpoint_step: Arc<AtomicU64>) -> Self {
        let buffers = BufferPool::new(PULL_BUFFER_BYTES_MAX);
        Self { cell, held, checkpoint_step, buffers }
    }

    fn admit(&self, fence: Option<pb::Fence>) -> Result<(), Status> {
        let (slot, generation) = fence_from_proto(fence)?;
        Ok(self.held.admit(slot, generation)?)
    }

    /// `admit` for a request that changes the shard: a planned shutdown waits for the guard.
    fn admit_write(&self, fence: Option<pb::Fence>) -> Result<OwnedRwLockReadGuard<()>, Status> {
        let (slot, generation) = fence_from_proto(fence)?;
        Ok(self.held.admit_write(slot, generation)?)
    }

    /// `PushGrads`: lease and fence, then the shard applies the push whole or not at all. The
    /// new step.
    pub async fn push_blocks<P>(
        &self,
        fence: Option<pb::Fence>,
        blocks: Vec<(BlockId, P)>,
    ) -> Result<u64, Status>
    where
        P: Payload + Send + 'static,
    {
        let _write = self.admit_write(fence)?;
        let shard = self.cell.ready()?;
        shard.check_basis(fence.and_then(|fence| fence.model_restore))?;
        apply(shard, blocks).await
    }

    /// `PushPull`: lease and fence once, the pull's size checked, then the push applied whole
    /// or not at all and the pull answered from the same shard (no check left to fail after
    /// the push is applied, so a client never sees an error for a push that happened).
    pub async fn push_pull<P>(
        &self,
        fence: Option<pb::Fence>,
        blocks: Vec<(BlockId, P)>,
        ids: &[BlockId],
    ) -> Result<(Vec<(BlockId, Bytes)>, PullStamp), Status>
    where
        P: Payload + Send + 'static,
    {
        let write = self.admit_write(fence)?;
        let shard = self.cell.ready()?;
        shard.check_basis(fence.and_then(|fence| fence.model_restore))?;
        let bytes = pull_size(&shard, ids)?;
        let step = apply(shard.clone(), blocks).await?;
        drop(write);
        let copies = shard.pull_with(ids, |values| self.buffers.encode(values))?;
        metrics::counter!("raftrain_pserver_bytes_pulled_total").increment(bytes as u64);
        Ok((copies, stamp_of(&shard, step)))
    }

    /// `PullParams`: lease and fence, then a copy of each block (every block of the slot when
    /// `ids` is empty) taken whole under its lock, as little-endian bytes; and the step.
    pub fn pull_blocks(
        &self,
        fence: Option<pb::Fence>,
        ids: &[BlockId],
    ) -> Result<(Vec<(BlockId, Bytes)>, PullStamp), Status> {
        self.admit(fence)?;
        let shard = self.cell.ready()?;
        let bytes = pull_size(&shard, ids)?;
        let copies = shard.pull_with(ids, |values| self.buffers.encode(values))?;
        metrics::counter!("raftrain_pserver_bytes_pulled_total").increment(bytes as u64);
        Ok((copies, stamp_of(&shard, shard.step())))
    }
}

/// The payload bytes a pull of `ids` answers, within the reply limit (a single block always
/// fits).
fn pull_size(shard: &Shard, ids: &[BlockId]) -> Result<usize, Status> {
    let bytes = shard.pull_bytes(ids)?;
    if ids.len() != 1 && bytes > PAYLOAD_BYTES_MAX {
        return Err(Status::invalid_argument(format!(
            "{bytes} bytes in all is over the {PAYLOAD_BYTES_MAX}-byte reply limit: ask for fewer blocks"
        )));
    }
    Ok(bytes)
}

/// Applies a push; the new step. A small push is applied on the calling task (handing it to a
/// blocking thread and back cost more than the arithmetic), a large one on a blocking thread
/// so it does not stall the reactor.
async fn apply<P>(shard: Arc<Shard>, blocks: Vec<(BlockId, P)>) -> Result<u64, Status>
where
    P: Payload + Send + 'static,
{
    let bytes: usize = blocks.iter().map(|(_, values)| values.byte_len()).sum();
    let step = if bytes <= INLINE_PUSH_BYTES_MAX {
        shard.push(&blocks)?
    } else {
        tokio::task::spawn_blocking(move || shard.push(&blocks))
            .await
            .map_err(|error| Status::internal(format!("applying the push panicked: {error}")))??
    };
    metrics::counter!("raftrain_pserver_bytes_pushed_total").increment(bytes as u64);
    Ok(step)
}

#[tonic::async_trait]
impl PServerService for PServerRpc {
    async fn init_params(
        &self,
        request: Request<pb::InitParamsRequest>,
    ) -> Result<Response<pb::InitParamsReply>, Status> {
        let request = request.into_inner();
        let _write = self.admit_write(request.fence)?;
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
        let _write = self.admit_write(request.fence)?;
        self.cell.finish(request.initializer)?;
        tracing::info!(
            slot = self.held.slot(),
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
        let blocks = request
            .blocks
            .into_iter()
            .map(|block| (BlockId { name: block.name, index: block.index }, block.values))
            .collect();
        let step = self.push_blocks(request.fence, blocks).await?;
        Ok(Response::new(pb::PushGradsReply { step }))
    }

    async fn pull_params(
        &self,
        request: Request<pb::PullParamsRequest>,
    ) -> Result<Response<pb::PullParamsReply>, Status> {
        let request = request.into_inner();
        let ids = ids_from_proto(request.blocks);
        let (copies, stamp) = self.pull_blocks(request.fence, &ids)?;
        let blocks = copies
            .into_iter()
            .map(|(id, values)| pb::Block { name: id.name, index: id.index, values })
            .collect();
        let (step, model_restore) = (stamp.step, stamp.model_restore);
        Ok(Response::new(pb::PullParamsReply { blocks, step, model_restore }))
    }

    async fn push_pull(
        &self,
        request: Request<pb::PushPullRequest>,
    ) -> Result<Response<pb::PullParamsReply>, Status> {
        let request = request.into_inner();
        let blocks = request
            .blocks
            .into_iter()
            .map(|block| (BlockId { name: block.name, index: block.index }, block.values))
            .collect();
        let ids = ids_from_proto(request.pull);
        let (copies, stamp) = self.push_pull(request.fence, blocks, &ids).await?;
        let blocks = copies
            .into_iter()
            .map(|(id, values)| pb::Block { name: id.name, index: id.index, values })
            .collect();
        let (step, model_restore) = (stamp.step, stamp.model_restore);
        Ok(Response::new(pb::PullParamsReply { blocks, step, model_restore }))
    }

    async fn status(
        &self,
        _request: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusReply>, Status> {
        self.held.check()?;
        let (layout, shard, initializing) = self.cell.describe();
        let state = match (&shard, initializing) {
            (Some(_), _) => pb::ShardState::Ready,
            (None, true) => pb::ShardState::Initializing,
            (None, false) => pb::ShardState::Empty,
        };
        let reply = pb::StatusReply {
            slot: self.held.slot(),
            generation: self.held.generation(),
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
