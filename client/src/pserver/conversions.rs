//! The one place protobuf meets the pserver's own types.

use proto::pserver as pb;
use tonic::Status;

use crate::pserver::layout::{JobLayout, ParamSpec};
use crate::pserver::placement::BlockId;
use optimizer::{OptimizerConfig, OptimizerKind};

/// The wire form of a layout.
pub fn layout_to_proto(layout: &JobLayout) -> pb::JobLayout {
    let params = layout
        .params
        .iter()
        .map(|param| pb::ParamShape { name: param.name.clone(), shape: param.shape.clone() })
        .collect();
    pb::JobLayout {
        params,
        block_elements: layout.block_elements,
        slot_count: layout.slot_count,
        optimizer: Some(optimizer_to_proto(&layout.optimizer)),
    }
}

/// A layout from the wire; `INVALID_ARGUMENT` naming the field when one is missing. Limits
/// are checked by `JobLayout::validate`.
pub fn layout_from_proto(layout: Option<pb::JobLayout>) -> Result<JobLayout, Status> {
    let layout = layout.ok_or_else(|| Status::invalid_argument("layout is missing"))?;
    let optimizer = optimizer_from_proto(layout.optimizer)?;
    let params = layout
        .params
        .into_iter()
        .map(|param| ParamSpec { name: param.name, shape: param.shape })
        .collect();
    Ok(JobLayout {
        params,
        block_elements: layout.block_elements,
        slot_count: layout.slot_count,
        optimizer,
    })
}

fn optimizer_to_proto(config: &OptimizerConfig) -> pb::Optimizer {
    use pb::optimizer::Kind;
    let kind = match config.kind {
        OptimizerKind::Sgd => Kind::Sgd(pb::Sgd {}),
        OptimizerKind::Momentum { momentum, nesterov } => {
            Kind::Momentum(pb::Momentum { momentum, nesterov })
        }
        OptimizerKind::Adam { beta1, beta2, epsilon } => {
            Kind::Adam(pb::Adam { beta1, beta2, epsilon })
        }
        OptimizerKind::Adagrad { epsilon, initial_accumulator } => {
            Kind::Adagrad(pb::Adagrad { epsilon, initial_accumulator })
        }
    };
    pb::Optimizer { learning_rate: config.learning_rate, kind: Some(kind) }
}

fn optimizer_from_proto(optimizer: Option<pb::Optimizer>) -> Result<OptimizerConfig, Status> {
    use pb::optimizer::Kind;
    let optimizer =
        optimizer.ok_or_else(|| Status::invalid_argument("layout.optimizer is missing"))?;
    let kind = match optimizer.kind {
        None => return Err(Status::invalid_argument("layout.optimizer.kind is missing")),
        Some(Kind::Sgd(_)) => OptimizerKind::Sgd,
        Some(Kind::Momentum(pb::Momentum { momentum, nesterov })) => {
            OptimizerKind::Momentum { momentum, nesterov }
        }
        Some(Kind::Adam(pb::Adam { beta1, beta2, epsilon })) => {
            OptimizerKind::Adam { beta1, beta2, epsilon }
        }
        Some(Kind::Adagrad(pb::Adagrad { epsilon, initial_accumulator })) => {
            OptimizerKind::Adagrad { epsilon, initial_accumulator }
        }
    };
    Ok(OptimizerConfig { learning_rate: optimizer.learning_rate, kind })
}

/// Blocks of a request as (id, payload) pairs, borrowing the payloads.
pub fn blocks_from_proto(blocks: &[pb::Block]) -> Vec<(BlockId, &[u8])> {
    blocks
        .iter()
        .map(|block| {
            (BlockId { name: block.name.clone(), index: block.index }, block.values.as_ref())
        })
        .collect()
}

/// The block ids a pull asks for.
pub fn ids_from_proto(ids: Vec<pb::BlockId>) -> Vec<BlockId> {
    ids.into_iter().map(|id| BlockId { name: id.name, index: id.index }).collect()
}

/// The fence of a request; `INVALID_ARGUMENT` when it is missing.
pub fn fence_from_proto(fence: Option<pb::Fence>) -> Result<(u32, u64), Status> {
    let fence =
        fence.ok_or_else(|| Status::invalid_argument("fence (slot and generation) is missing"))?;
    Ok((fence.slot, fence.generation))
}
