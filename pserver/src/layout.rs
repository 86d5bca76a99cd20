//! `JobLayout`: what every pserver of a job must agree on (the parameters and their shapes,
//! the block size, the slot count, the optimizer), its limits, and the blocks a slot serves.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::optimizer::{OptimizerConfig, OptimizerError};
use crate::placement::{block_count, block_range, slot_of, BlockId};

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
        Ok(self.optimizer.validate()?)
    }

    /// The parameter named `name`.
    pub fn param(&self, name: &str) -> Option<&ParamSpec> {
        self.params.iter().find(|param| param.name == name)
    }

    /// Every block of slot `slot` with its element count, in (name, index) order.
    pub fn blocks_of_slot(&self, slot: u32) -> BTreeMap<BlockId, usize> {
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
    use crate::optimizer::OptimizerKind;

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
}
