//! `JobLayout`: what every pserver of a job must agree on (the parameters and their shapes,
//! the block size, the slot count, the optimizer), its limits, and the blocks a slot serves.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::pserver::placement::{block_count, block_range, slot_of, BlockId};
use optimizer::{OptimizerConfig, OptimizerError, OptimizerKind};

/// Block size when the trainer does not choose one.
pub const BLOCK_ELEMENTS_DEFAULT: u32 = 65_536;
/// The largest block: 64 MiB of f32, so one block always fits one message.
pub const BLOCK_ELEMENTS_MAX: u32 = 1 << 24;
/// At most this many parameters per job (models are a handful of tensors).
pub const PARAM_COUNT_MAX: usize = 4_096;
/// A parameter name's length limit.
pub const PARAM_NAME_BYTES_MAX: usize = 256;
/// A parameter's rank limit.
pub const RANK_MAX: usize = 8;
/// The whole model: 2^30 f32 (4 GiB of values, 12 GiB with Adam's state, over all pservers).
pub const MODEL_ELEMENTS_MAX: u64 = 1 << 30;
/// At most this many slots (the master's pserver slot limit is lower still).
pub const SLOT_COUNT_MAX: u32 = 1_024;
/// What one block costs besides its values, at the longest name: its id (a name of up to
/// [`PARAM_NAME_BYTES_MAX`] bytes), an entry in the expected and received tables while
/// initializing, then the shard's entry with its lock and the optimizer state's vector
/// headers; a trainer's client keeps a similar entry per block. An estimate with room to
/// spare (a 256-byte name plus a few hundred bytes of map nodes and headers), not a measurement.
pub const BLOCK_ENTRY_BYTES_MAX: u64 = 1_024;
/// The memory one shard's block tables may take: a pserver must not be made to spend more on
/// bookkeeping than a modest share of what its values take.
pub const SHARD_BLOCK_TABLE_BYTES_MAX: u64 = 256 << 20;
/// The most blocks one slot serves (262,144): [`SHARD_BLOCK_TABLE_BYTES_MAX`] of entries.
/// A layout of one 2^30-element tensor in one-element blocks passed validation before this,
/// and the pserver built a table entry per block until it aborted.
pub const SHARD_BLOCK_COUNT_MAX: u64 = SHARD_BLOCK_TABLE_BYTES_MAX / BLOCK_ENTRY_BYTES_MAX;
/// The most blocks in a whole layout (1,048,576): every trainer keeps an entry per block of
/// the model (1 GiB of entries at most), and a pserver walks them all once to find its own.
/// With the default block size the largest model has 16,384 blocks.
pub const LAYOUT_BLOCK_COUNT_MAX: u64 = 1 << 20;

thread_local! {
    /// How many times this thread walked a slot's blocks, so tests (the pserver's among them)
    /// can prove a path does not, without timing it. Counting costs nothing beside the walk.
    pub static SLOT_WALKS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// One named dense tensor of the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSpec {
    pub name: String,
    pub shape: Vec<u64>,
}

impl ParamSpec {
    /// Elements in the flat tensor (a rank-0 tensor holds one).
    pub fn elements(&self) -> u64 {
        self.shape.iter().product()
    }
}

/// The job's parameters, blocks, slots and optimizer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobLayout {
    pub params: Vec<ParamSpec>,
    pub block_elements: u32,
    pub slot_count: u32,
    pub optimizer: OptimizerConfig,
}

/// The first way `theirs` (what a pserver serves) differs from `ours`, in words, or `None`
/// when they are the same.
pub fn first_difference(theirs: &JobLayout, ours: &JobLayout) -> Option<String> {
    let names = |layout: &JobLayout| -> Vec<String> {
        layout
            .params
            .iter()
            .map(|param| format!("{} {}", param.name, shape(&param.shape)))
            .collect()
    };
    let optimizer = |config: &OptimizerConfig| {
        format!("{} at learning rate {}", optimizer_name(&config.kind), config.learning_rate)
    };
    if theirs.params != ours.params {
        let (theirs, ours) = (names(theirs).join(", "), names(ours).join(", "));
        Some(format!("parameters {theirs} there, {ours} here"))
    } else if theirs.slot_count != ours.slot_count {
        Some(format!("{} slots there, {} here", theirs.slot_count, ours.slot_count))
    } else if theirs.block_elements != ours.block_elements {
        let (there, here) = (theirs.block_elements, ours.block_elements);
        Some(format!("blocks of {there} elements there, {here} here"))
    } else if theirs.optimizer != ours.optimizer {
        let (there, here) = (optimizer(&theirs.optimizer), optimizer(&ours.optimizer));
        Some(format!("{there} there, {here} here (or other constants)"))
    } else {
        None
    }
}

/// A shape as `3x4` (a scalar: `scalar`).
fn shape(dimensions: &[u64]) -> String {
    match dimensions.is_empty() {
        true => "scalar".to_string(),
        false => dimensions.iter().map(u64::to_string).collect::<Vec<_>>().join("x"),
    }
}

fn optimizer_name(kind: &OptimizerKind) -> &'static str {
    match kind {
        OptimizerKind::Sgd => "sgd",
        OptimizerKind::Momentum { .. } => "momentum",
        OptimizerKind::Adam { .. } => "adam",
        OptimizerKind::Adagrad { .. } => "adagrad",
    }
}

/// A layout that no pserver can serve; says which field.
#[derive(Debug, Error, PartialEq)]
pub enum LayoutError {
    #[error("layout: {0}")]
    Invalid(String),
    #[error("layout: {0}")]
    Optimizer(#[from] OptimizerError),
}

impl JobLayout {
    /// Checks every limit; a layout that passes can be served and checkpointed.
    pub fn validate(&self) -> Result<(), LayoutError> {
        let invalid = |reason: String| Err(LayoutError::Invalid(reason));
        if !(1..=BLOCK_ELEMENTS_MAX).contains(&self.block_elements) {
            return invalid(format!(
                "block_elements {} is outside 1..={BLOCK_ELEMENTS_MAX}",
                self.block_elements
            ));
        }
        if !(1..=SLOT_COUNT_MAX).contains(&self.slot_count) {
            return invalid(format!(
                "slot_count {} is outside 1..={SLOT_COUNT_MAX}",
                self.slot_count
            ));
        }
        if self.params.is_empty() || self.params.len() > PARAM_COUNT_MAX {
            return invalid(format!(
                "{} parameters; a job has 1..={PARAM_COUNT_MAX}",
                self.params.len()
            ));
        }
        let mut names = std::collections::HashSet::new();
        let mut total = 0_u64;
        for param in &self.params {
            validate_param(param)?;
            if !names.insert(param.name.as_str()) {
                return invalid(format!("parameter {:?} is named twice", param.name));
            }
            total = total.saturating_add(param.elements());
        }
        if total > MODEL_ELEMENTS_MAX {
            return invalid(format!("{total} elements in all is over {MODEL_ELEMENTS_MAX}"));
        }
        let blocks = self.block_count();
        if blocks > LAYOUT_BLOCK_COUNT_MAX {
            return invalid(format!(
                "{blocks} blocks in all (block_elements {}) is over {LAYOUT_BLOCK_COUNT_MAX} \
                 blocks: choose larger blocks",
                self.block_elements
            ));
        }
        Ok(self.optimizer.validate()?)
    }

    /// Checks that slot `slot` serves at most [`SHARD_BLOCK_COUNT_MAX`] blocks; call after
    /// [`JobLayout::validate`], which bounds the walk. Allocates nothing.
    pub fn validate_slot(&self, slot: u32) -> Result<(), LayoutError> {
        let mut blocks = 0_u64;
        for param in &self.params {
            let count = block_count(param.elements(), self.block_elements);
            blocks += (0..count)
                .filter(|&index| slot_of(&param.name, index, self.slot_count) == slot)
                .count() as u64;
        }
        if blocks > SHARD_BLOCK_COUNT_MAX {
            return Err(LayoutError::Invalid(format!(
                "slot {slot} would serve {blocks} blocks, over {SHARD_BLOCK_COUNT_MAX} blocks per \
                 shard: choose larger blocks or more pservers"
            )));
        }
        Ok(())
    }

    /// Blocks in the whole layout, computed without walking them (saturating).
    fn block_count(&self) -> u64 {
        let block_elements = u64::from(self.block_elements.max(1));
        self.params
            .iter()
            .map(|param| param.elements().div_ceil(block_elements))
            .fold(0_u64, u64::saturating_add)
    }

    /// The parameter named `name`.
    pub fn param(&self, name: &str) -> Option<&ParamSpec> {
        self.params.iter().find(|param| param.name == name)
    }

    /// Every block of slot `slot` with its element count, in (name, index) order. O(blocks of
    /// the layout): never on a per-request path of a serving shard.
    pub fn blocks_of_slot(&self, slot: u32) -> BTreeMap<BlockId, usize> {
        SLOT_WALKS.with(|walks| walks.set(walks.get() + 1));
        let mut blocks = BTreeMap::new();
        for param in &self.params {
            let elements = param.elements();
            for index in 0..block_count(elements, self.block_elements) {
                if slot_of(&param.name, index, self.slot_count) == slot {
                    let length = block_range(elements, self.block_elements, index).len();
                    blocks.insert(BlockId { name: param.name.clone(), index }, length);
                }
            }
        }
        blocks
    }

    /// The elements block `id` covers in its flat tensor, if the block exists.
    pub fn block_length(&self, id: &BlockId) -> Option<usize> {
        let elements = self.param(&id.name)?.elements();
        if id.index >= block_count(elements, self.block_elements) {
            return None;
        }
        Some(block_range(elements, self.block_elements, id.index).len())
    }
}

fn validate_param(param: &ParamSpec) -> Result<(), LayoutError> {
    let invalid = |reason: String| Err(LayoutError::Invalid(reason));
    if param.name.is_empty() || param.name.len() > PARAM_NAME_BYTES_MAX {
        return invalid(format!(
            "parameter name {:?} must have 1..={PARAM_NAME_BYTES_MAX} bytes",
            param.name
        ));
    }
    if param.shape.len() > RANK_MAX {
        return invalid(format!(
            "parameter {:?} has rank {}; at most {RANK_MAX}",
            param.name,
            param.shape.len()
        ));
    }
    let mut elements = 1_u64;
    for &dim in &param.shape {
        elements = elements
            .checked_mul(dim)
            .filter(|&count| count <= MODEL_ELEMENTS_MAX)
            .unwrap_or(u64::MAX);
    }
    if elements == 0 || elements > MODEL_ELEMENTS_MAX {
        return invalid(format!(
            "parameter {:?} has shape {:?}: 1..={MODEL_ELEMENTS_MAX} elements",
            param.name, param.shape
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(params: &[(&str, &[u64])], block_elements: u32, slot_count: u32) -> JobLayout {
        let params = params
            .iter()
            .map(|(name, shape)| ParamSpec { name: name.to_string(), shape: shape.to_vec() })
            .collect();
        let optimizer = OptimizerConfig { learning_rate: 0.1, kind: OptimizerKind::Sgd };
        JobLayout { params, block_elements, slot_count, optimizer }
    }

    #[test]
    fn the_slots_partition_every_block() {
        let job = layout(&[("w", &[300, 7]), ("b", &[7]), ("scalar", &[])], 64, 3);
        job.validate().expect("valid");
        let mut seen = BTreeMap::new();
        for slot in 0..3 {
            for (id, length) in job.blocks_of_slot(slot) {
                assert_eq!(job.block_length(&id), Some(length));
                assert!(seen.insert(id, slot).is_none(), "a block on two slots");
            }
        }
        let blocks_of = |name: &str| seen.keys().filter(|id| id.name == name).count();
        assert_eq!((blocks_of("w"), blocks_of("b"), blocks_of("scalar")), (33, 1, 1));
    }

    /// A layout of more blocks than a pserver or trainer can keep entries for is refused by
    /// arithmetic, before any walk or allocation; so is a slot's share over the shard limit.
    #[test]
    fn block_counts_are_bounded_per_layout_and_per_shard() {
        let absurd = layout(&[("w", &[1 << 30])], 1, 1);
        let error = absurd.validate().expect_err("2^30 blocks").to_string();
        assert!(error.contains("blocks"), "{error}");
        let at_limit = layout(&[("w", &[LAYOUT_BLOCK_COUNT_MAX])], 1, 2);
        at_limit.validate().expect("exactly the layout limit");
        let error = at_limit.validate_slot(0).expect_err("a half is over the shard limit");
        assert!(error.to_string().contains("per shard"), "{error}");
        let spread = layout(&[("w", &[LAYOUT_BLOCK_COUNT_MAX])], 1, 8);
        (0..8).for_each(|slot| spread.validate_slot(slot).expect("an eighth fits a shard"));
    }

    #[test]
    fn layouts_past_a_limit_are_refused_naming_it() {
        let cases: [(JobLayout, &str); 7] = [
            (layout(&[("w", &[4])], 0, 1), "block_elements"),
            (layout(&[("w", &[4])], 4, 0), "slot_count"),
            (layout(&[], 4, 1), "parameters"),
            (layout(&[("w", &[4]), ("w", &[2])], 4, 1), "named twice"),
            (layout(&[("w", &[0, 4])], 4, 1), "shape"),
            (layout(&[("w", &[1 << 20, 1 << 20])], 4, 1), "shape"),
            (layout(&[("", &[4])], 4, 1), "name"),
        ];
        for (job, want) in cases {
            let error = job.validate().expect_err("refused").to_string();
            assert!(error.contains(want), "{error} lacks {want}");
        }
    }

    /// A layout mismatch is told in words, naming the first field that differs.
    #[test]
    fn the_first_difference_is_named_in_words() {
        let ours = layout(&[("w", &[3, 4]), ("b", &[3])], 64, 2);
        assert_eq!(first_difference(&ours, &ours), None);
        let shapes = layout(&[("w", &[4, 4]), ("b", &[3])], 64, 2);
        let told = first_difference(&shapes, &ours).expect("a difference");
        assert_eq!(told, "parameters w 4x4, b 3 there, w 3x4, b 3 here");
        let slots = first_difference(&layout(&[("w", &[3, 4]), ("b", &[3])], 64, 3), &ours);
        assert_eq!(slots.as_deref(), Some("3 slots there, 2 here"));
        let mut adam = ours.clone();
        adam.optimizer.kind = OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, epsilon: 1e-8 };
        let told = first_difference(&adam, &ours).expect("a difference");
        assert!(told.starts_with("adam at learning rate") && !told.contains('{'), "{told}");
    }
}
