//! `Cache`: the newest values a `PServerClient` saw of each slot's blocks (its initial values,
//! then each pull), which an empty replacement is initialized from. Nothing is copied to keep
//! them: sent and received payloads are kept as they are, and a pull into shared tensors
//! (`exchange`) keeps the tensors, so the frames it arrived in are freed once decoded.

use std::collections::BTreeMap;
use std::sync::Arc;

use proto::pserver as pb;

use super::batches::blocks_by_slot;
use super::pserver_client::CachedBlock;
use super::tensor_bytes::{shared_bytes, Tensors};
use crate::pserver::layout::JobLayout;

/// What a client last saw of the model.
#[derive(Debug, Default)]
pub enum Cache {
    #[default]
    Empty,
    /// Payloads per slot, in request batches, as they were sent or received.
    Blocks(BTreeMap<u32, Vec<Vec<CachedBlock>>>),
    /// The whole model, as pulled into shared tensors.
    Tensors(Arc<Tensors>),
}

impl Cache {
    /// `slot`'s blocks in request batches, to initialize it with; `None` if nothing was seen.
    pub fn batches(&self, slot: u32, layout: &JobLayout) -> Option<Vec<Vec<pb::Block>>> {
        match self {
            Cache::Empty => None,
            // Received values may lie in several frames: joined here, on this rare path.
            Cache::Blocks(by_slot) => {
                let block = |(id, values): &CachedBlock| pb::Block {
                    name: id.name.clone(),
                    index: id.index,
                    values: values.clone().into_contiguous(),
                };
                let batches = by_slot.get(&slot)?;
                Some(batches.iter().map(|blocks| blocks.iter().map(block).collect()).collect())
            }
            Cache::Tensors(tensors) => {
                let borrowed: Vec<(&str, &[f32])> = tensors
                    .iter()
                    .map(|(name, values)| (name.as_str(), values.as_slice()))
                    .collect();
                let view = |name: &str, range, _: &[f32]| shared_bytes(tensors, name, range);
                blocks_by_slot(layout, &borrowed, view).remove(&slot)
            }
        }
    }
}
