//! Cutting a model into per-slot requests of about `REQUEST_PAYLOAD_BYTES_TARGET` bytes, and
//! putting pulled blocks back into flat tensors.

use std::collections::BTreeMap;
use std::ops::Range;

use bytes::Bytes;
use platform::unary::Segments;
use proto::pserver as pb;

use crate::pserver::layout::JobLayout;
use crate::pserver::limits::REQUEST_PAYLOAD_BYTES_TARGET;
use crate::pserver::payload;
use crate::pserver::placement::{block_count, block_range, slot_of, BlockId};

/// Per slot, the blocks of `tensors` (name -> flat values) in requests of bounded size, each
/// block's payload made by `payload_of(name, range, values)`: an encoded copy, or a view of
/// shared tensors. Tensors the layout does not name are refused by the caller before this.
pub fn blocks_by_slot(
    layout: &JobLayout,
    tensors: &[(&str, &[f32])],
    payload_of: impl Fn(&str, Range<usize>, &[f32]) -> Bytes,
) -> BTreeMap<u32, Vec<Vec<pb::Block>>> {
    let mut by_slot: BTreeMap<u32, Vec<Vec<pb::Block>>> = BTreeMap::new();
    let mut sizes: BTreeMap<u32, usize> = BTreeMap::new();
    for (name, values) in tensors {
        let elements = values.len() as u64;
        for index in 0..block_count(elements, layout.block_elements) {
            let slot = slot_of(name, index, layout.slot_count);
            let range = block_range(elements, layout.block_elements, index);
            let encoded_len = range.len() * 4;
            let bytes = payload_of(name, range.clone(), &values[range]);
            // A payload is exactly its block's values: any other length would be applied to
            // other elements at the pserver, or refused there after the others were sent.
            assert_eq!(bytes.len(), encoded_len, "the payload of {name} block {index}");
            let requests = by_slot.entry(slot).or_default();
            let size = sizes.entry(slot).or_default();
            if requests.is_empty() || *size + bytes.len() > REQUEST_PAYLOAD_BYTES_TARGET {
                requests.push(Vec::new());
                *size = 0;
            }
            *size += bytes.len();
            let request = requests.last_mut().expect("pushed above");
            request.push(pb::Block { name: name.to_string(), index, values: bytes });
        }
    }
    by_slot
}

/// Per slot, the block ids of the whole layout in requests of bounded size.
pub fn ids_by_slot(layout: &JobLayout) -> BTreeMap<u32, Vec<Vec<BlockId>>> {
    let mut by_slot = BTreeMap::new();
    for slot in 0..layout.slot_count {
        let mut requests: Vec<Vec<BlockId>> = Vec::new();
        let mut size = 0;
        for (id, length) in layout.blocks_of_slot(slot) {
            if requests.is_empty() || size + length * 4 > REQUEST_PAYLOAD_BYTES_TARGET {
                requests.push(Vec::new());
                size = 0;
            }
            size += length * 4;
            requests.last_mut().expect("pushed above").push(id);
        }
        by_slot.insert(slot, requests);
    }
    by_slot
}

/// Zeroed flat tensors for every parameter of the layout.
pub fn empty_tensors(layout: &JobLayout) -> BTreeMap<String, Vec<f32>> {
    layout
        .params
        .iter()
        .map(|param| (param.name.clone(), vec![0.0; param.elements() as usize]))
        .collect()
}

/// Makes `tensors` one zeroed flat buffer per parameter of the layout unless they are that
/// already (a trainer pulling every few batches reuses its buffers).
pub fn size_tensors(layout: &JobLayout, tensors: &mut BTreeMap<String, Vec<f32>>) {
    let sized = layout.params.iter().all(|param| {
        tensors.get(&param.name).is_some_and(|values| values.len() as u64 == param.elements())
    }) && tensors.len() == layout.params.len();
    if !sized {
        *tensors = empty_tensors(layout);
    }
}

/// Decodes a pulled block straight into its tensor (from the frames it arrived in); the error
/// names the block.
pub fn place(
    layout: &JobLayout,
    tensors: &mut BTreeMap<String, Vec<f32>>,
    id: &BlockId,
    values: &Segments,
) -> Result<(), String> {
    let length = layout
        .block_length(id)
        .ok_or_else(|| format!("block {}#{} is not in the layout", id.name, id.index))?;
    let tensor = tensors.get_mut(&id.name).expect("the layout names the tensor");
    let range = block_range(tensor.len() as u64, layout.block_elements, id.index);
    if range.len() != length {
        return Err(format!("block {}#{} does not fit its tensor", id.name, id.index));
    }
    payload::decode_into(values, &mut tensor[range])
        .map_err(|error| format!("block {}#{}: {error}", id.name, id.index))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pserver::layout::ParamSpec;
    use optimizer::{OptimizerConfig, OptimizerKind};

    #[test]
    fn pushed_blocks_cover_every_element_once_and_place_back() {
        let params = vec![
            ParamSpec { name: "w".into(), shape: vec![1000, 3] },
            ParamSpec { name: "b".into(), shape: vec![3] },
        ];
        let optimizer = OptimizerConfig { learning_rate: 0.1, kind: OptimizerKind::Sgd };
        let layout = JobLayout { params, block_elements: 256, slot_count: 3, optimizer };
        let w: Vec<f32> = (0..3000).map(|i| i as f32).collect();
        let b = [7.0, 8.0, 9.0];
        let mut rebuilt = empty_tensors(&layout);
        let tensors: [(&str, &[f32]); 2] = [("w", &w), ("b", &b)];
        let encode =
            |_: &str, _, values: &[f32]| Bytes::from(crate::pserver::f32_bytes::encode(values));
        for (slot, requests) in blocks_by_slot(&layout, &tensors, encode) {
            for block in requests.iter().flatten() {
                assert_eq!(slot_of(&block.name, block.index, 3), slot);
                let id = BlockId { name: block.name.clone(), index: block.index };
                place(&layout, &mut rebuilt, &id, &Segments::from(block.values.clone()))
                    .expect("placed");
            }
        }
        assert_eq!(rebuilt["w"], w);
        assert_eq!(rebuilt["b"], b.to_vec());
        let pulled: usize = ids_by_slot(&layout).values().flatten().map(Vec::len).sum();
        assert_eq!(pulled, 12 + 1, "every block asked once");
    }
}
