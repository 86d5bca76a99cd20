//! `ShardError`: why a pserver refused a request; each names the block or field at fault.

use thiserror::Error;

use crate::f32_bytes::PayloadError;
use crate::layout::LayoutError;
use crate::placement::BlockId;

/// A refused request. Nothing the shard stores changed.
#[derive(Debug, Error)]
pub enum ShardError {
    #[error("block {}#{} is not part of the job's layout", id.name, id.index)]
    UnknownBlock { id: BlockId },
    #[error("block {}#{} is served by slot {slot}, not this one", id.name, id.index)]
    NotOwned { id: BlockId, slot: u32 },
    #[error("block {}#{}: {error}", id.name, id.index)]
    Payload { id: BlockId, error: PayloadError },
    #[error(
        "block {}#{}: the push would leave a parameter or optimizer state that is not finite \
         (an overflow); the whole push was refused",
        id.name, id.index
    )]
    NotFiniteResult { id: BlockId },
    #[error("block {}#{} appears twice in one request", id.name, id.index)]
    DuplicateBlock { id: BlockId },
    #[error("block {}#{} does not have {want} elements with the optimizer's state", id.name, id.index)]
    BlockShape { id: BlockId, want: usize },
    #[error("block {}#{} was never sent ({missing} blocks missing)", id.name, id.index)]
    MissingBlock { id: BlockId, missing: usize },
    #[error(transparent)]
    Layout(#[from] LayoutError),
    #[error("the job has {job} slots, this pserver was started for {ours} (--num-pservers)")]
    SlotCount { job: u32, ours: u32 },
    #[error("the offered layout differs from the one this shard {0}")]
    LayoutMismatch(&'static str),
    #[error("the shard is not initialized yet: initialize it (InitParams, FinishInit) or wait")]
    NotReady,
    #[error("initializer {caller} is not the one at work ({current})")]
    NotInitializer { caller: u64, current: u64 },
    #[error(
        "the push was computed on the model of restore {basis}, and this shard is of restore \
         {shard}: a gradient of a replaced model is never applied to another; pull, and push \
         what is computed on that"
    )]
    ModelRestored { basis: u64, shard: u64 },
}
