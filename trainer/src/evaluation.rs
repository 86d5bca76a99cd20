//! Scoring a model on a dataset (paths or globs): loss and accuracy over every record, read
//! chunk by chunk through `storage` with each record validated.

use std::path::Path;

use anyhow::Context as _;
use storage::recordio::{expand_patterns, read_chunk_into, DecodedChunk, FileIndex};

use crate::batch::BatchBuilder;
use crate::model::{Evaluation, ModelConfig, Params};
use crate::task_data::add_chunk;

/// Examples per evaluation batch: big enough for fast matrix products, small enough to bound
/// memory.
const EVAL_BATCH_EXAMPLES: usize = 4_096;

/// Loss and accuracy of `params` over every record the patterns name.
pub fn evaluate_dataset(
    config: &ModelConfig,
    params: &Params,
    patterns: &[String],
) -> anyhow::Result<Evaluation> {
    let mut total =
        Evaluation { loss: 0.0, correct: config.kind.classifies().then_some(0), examples: 0 };
    let mut chunk = DecodedChunk::default();
    for path in expand_patterns(patterns)? {
        let index = FileIndex::build(&path)?;
        let mut file =
            std::fs::File::open(&path).with_context(|| format!("open {}", path.display()))?;
        for meta in index.chunks() {
            read_chunk_into(&mut file, &path, meta, &mut chunk)?;
            total = total.merge(evaluate_chunk(config, params, &chunk, &path, meta.offset)?);
        }
    }
    anyhow::ensure!(total.examples > 0, "the evaluation dataset {patterns:?} has no records");
    Ok(total)
}

fn evaluate_chunk(
    config: &ModelConfig,
    params: &Params,
    chunk: &DecodedChunk,
    path: &Path,
    offset: u64,
) -> anyhow::Result<Evaluation> {
    let mut builder = BatchBuilder::new(config.features);
    let mut batches = Vec::new();
    add_chunk(config, chunk, path, offset, EVAL_BATCH_EXAMPLES, &mut builder, &mut batches)?;
    if !builder.is_empty() {
        batches.push(builder.take());
    }
    let mut total =
        Evaluation { loss: 0.0, correct: config.kind.classifies().then_some(0), examples: 0 };
    for batch in &batches {
        total = total.merge(config.evaluate(params, batch)?);
    }
    Ok(total)
}
