//! Where each parameter block lives: block `(name, k)` is served by slot
//! `hash(name, k) mod slot_count`, with a fixed, process-independent hash (FNV-1a over the
//! name, mixed with the block index by splitmix64's finalizer). Trainers, pservers and a
//! restore all call this one pure function, so they always agree.

use std::ops::Range;

/// One block of one parameter: elements `[index * block_elements, ...)` of the flat tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId {
    pub name: String,
    pub index: u32,
}

/// The slot that serves block `index` of parameter `name` among `slot_count` slots.
pub fn slot_of(name: &str, index: u32, slot_count: u32) -> u32 {
    assert!(slot_count > 0, "a job has at least one pserver slot");
    let mixed = mix(fnv1a(name.as_bytes()) ^ mix(u64::from(index)));
    (mixed % u64::from(slot_count)) as u32
}

/// How many blocks a tensor of `elements` elements is cut into.
pub fn block_count(elements: u64, block_elements: u32) -> u32 {
    assert!(block_elements > 0, "blocks hold at least one element");
    let count = elements.div_ceil(u64::from(block_elements));
    u32::try_from(count).expect("layout validation bounds the block count")
}

/// The elements of the flat tensor that block `index` covers.
pub fn block_range(elements: u64, block_elements: u32, index: u32) -> Range<usize> {
    let start = u64::from(index) * u64::from(block_elements);
    let end = (start + u64::from(block_elements)).min(elements);
    assert!(start < end, "block {index} lies outside a tensor of {elements} elements");
    start as usize..end as usize
}

/// FNV-1a, 64 bits: stable across processes, platforms and Rust versions.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325_u64;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// splitmix64's finalizer: spreads consecutive block indices over all slots.
fn mix(mut value: u64) -> u64 {
    value = value.wrapping_add(0x9e37_79b9_7f4a_7c15);
    value = (value ^ (value >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    value = (value ^ (value >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    value ^ (value >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fixed_across_processes_and_versions() {
        // Values pinned once: a change here would move every block of every checkpoint.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        let pinned: Vec<u32> = (0..8).map(|k| slot_of("mlp.w1", k, 4)).collect();
        // Worked out independently (Python, the same constants).
        assert_eq!(pinned, [1, 0, 1, 3, 3, 2, 2, 1]);
    }

    #[test]
    fn every_element_belongs_to_exactly_one_block() {
        for (elements, block_elements) in [(1, 1), (10, 3), (65_536, 65_536), (65_537, 65_536)] {
            let blocks = block_count(elements, block_elements);
            let mut next = 0;
            for index in 0..blocks {
                let range = block_range(elements, block_elements, index);
                assert_eq!(range.start, next, "blocks are contiguous");
                assert!(range.len() <= block_elements as usize);
                next = range.end;
            }
            assert_eq!(next as u64, elements, "the blocks cover the tensor");
        }
    }

    #[test]
    fn a_large_tensor_spreads_evenly_over_the_slots() {
        // 100M elements in 64 Ki blocks: 1,526 blocks. Stated bound: no slot holds more than
        // 15% above the mean (binomial spread at this size is about 4% per standard deviation).
        let blocks = block_count(100_000_000, 65_536);
        for slot_count in [2_u32, 3, 4, 8] {
            let mut per_slot = vec![0_u32; slot_count as usize];
            for index in 0..blocks {
                per_slot[slot_of("model.weight", index, slot_count) as usize] += 1;
            }
            let mean = f64::from(blocks) / f64::from(slot_count);
            let most = f64::from(*per_slot.iter().max().expect("slots"));
            assert!(most <= mean * 1.15, "{slot_count} slots: {per_slot:?} (mean {mean})");
        }
    }

    #[test]
    fn small_tensors_do_not_pile_on_one_slot() {
        // 64 one-block tensors over 4 slots: every slot gets some.
        let mut per_slot = [0_u32; 4];
        for layer in 0..32 {
            for part in ["weight", "bias"] {
                per_slot[slot_of(&format!("layer{layer}.{part}"), 0, 4) as usize] += 1;
            }
        }
        assert!(per_slot.iter().all(|&count| count >= 8), "{per_slot:?}");
    }
}
