//! A small job layout and its initial values, shared by the tests.

use std::collections::BTreeMap;

use client::pserver::f32_bytes;
use client::pserver::layout::{JobLayout, ParamSpec};
use client::pserver::placement::BlockId;
use optimizer::{OptimizerConfig, OptimizerKind};
use pserver::block_state::BlockState;
use pserver::shard::Shard;

/// Two parameters in blocks of 4 over 2 slots, Adam.
pub fn layout() -> JobLayout {
    let params = vec![
        ParamSpec { name: "w".into(), shape: vec![5, 3] },
        ParamSpec { name: "b".into(), shape: vec![3] },
    ];
    let optimizer = OptimizerConfig { learning_rate: 0.1, kind: OptimizerKind::ADAM_DEFAULT };
    JobLayout { params, block_elements: 4, slot_count: 2, optimizer }
}

/// Slot `slot`'s blocks, every element set to `value`, as wire payloads.
pub fn payloads(slot: u32, value: f32) -> Vec<(BlockId, Vec<u8>)> {
    layout()
        .blocks_of_slot(slot)
        .into_iter()
        .map(|(id, length)| (id, f32_bytes::encode(&vec![value; length])))
        .collect()
}

pub fn borrowed(payloads: &[(BlockId, Vec<u8>)]) -> Vec<(BlockId, &[u8])> {
    payloads.iter().map(|(id, bytes)| (id.clone(), bytes.as_slice())).collect()
}

/// A serving shard for `slot` with every value at 1.
pub fn shard(slot: u32) -> Shard {
    let optimizer = layout().optimizer;
    let blocks: BTreeMap<BlockId, BlockState> = layout()
        .blocks_of_slot(slot)
        .into_iter()
        .map(|(id, length)| (id, BlockState::fresh(vec![1.0; length], &optimizer)))
        .collect();
    Shard::new(layout(), slot, 0, blocks).expect("a complete shard")
}
