//! A trained model on disk: safetensors with the model's kind and sizes in `__metadata__`, so
//! `raftrain eval` needs no model flags.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;

use crate::model::model_error::ModelConfigError;
use crate::model::{ModelConfig, ModelKind, Params};
use crate::safetensors::{read_safetensors, write_safetensors, NamedTensor, SavedTensors};

/// Writes `params` of `model` to `path`.
pub fn save(path: &Path, model: &ModelConfig, params: &Params) -> anyhow::Result<()> {
    let shapes = model.param_shapes();
    let tensors: Vec<NamedTensor<'_>> = shapes
        .iter()
        .map(|(name, shape)| {
            let values =
                params.get(name).with_context(|| format!("parameter {name} is missing"))?;
            Ok(NamedTensor { name, shape, values })
        })
        .collect::<anyhow::Result<_>>()?;
    let metadata = BTreeMap::from([
        ("model".to_string(), model.kind.name().to_string()),
        ("features".to_string(), model.features.to_string()),
        ("classes".to_string(), model.classes.to_string()),
        ("hidden".to_string(), model.hidden.to_string()),
    ]);
    Ok(write_safetensors(path, &tensors, &metadata)?)
}

/// Reads a saved model and the configuration its metadata names; every tensor must have the
/// shape that configuration gives it.
pub fn load(path: &Path) -> anyhow::Result<(ModelConfig, Params)> {
    let SavedTensors { params, shapes, metadata } = read_safetensors(path)?;
    let field = |name: &str| {
        metadata
            .get(name)
            .with_context(|| format!("{}: __metadata__ has no {name:?}", path.display()))
    };
    let number = |name: &str| -> anyhow::Result<usize> {
        field(name)?
            .parse()
            .with_context(|| format!("{}: __metadata__ {name:?} is not a number", path.display()))
    };
    let kind: ModelKind = field("model")?
        .parse()
        .map_err(|reason: ModelConfigError| anyhow::anyhow!("{}: {reason}", path.display()))?;
    let config = ModelConfig {
        kind,
        features: number("features")?,
        classes: number("classes")?,
        hidden: number("hidden")?,
    };
    config.validate().map_err(|reason| anyhow::anyhow!("{}: {reason}", path.display()))?;
    for (name, shape) in config.param_shapes() {
        anyhow::ensure!(
            shapes.get(&name) == Some(&shape),
            "{}: tensor {name} should have shape {shape:?}, has {:?}",
            path.display(),
            shapes.get(&name)
        );
    }
    Ok((config, params))
}
