//! `train_locally`: the single-process baseline. The same model, data, batches, optimizer and
//! passes as a distributed job, in memory with no master and no pservers: what a distributed
//! job's accuracy is compared with, and the control plane's cost measured against.

use std::time::{Duration, Instant};

use optimizer::{self, OptimizerConfig};
use storage::recordio::{expand_patterns, read_chunk_into, DecodedChunk, FileIndex};

use crate::batch::{Batch, BatchBuilder};
use crate::model::{ModelConfig, Params};
use crate::task_data::add_chunk;

/// What a local run produced.
#[derive(Debug)]
pub struct LocalRun {
    pub params: Params,
    pub examples: u64,
    /// Time spent training (reading the data excluded).
    pub elapsed: Duration,
}

/// Every record the patterns name, validated, in batches of `batch_size`.
pub fn load_batches(
    model: &ModelConfig,
    patterns: &[String],
    batch_size: usize,
) -> anyhow::Result<Vec<Batch>> {
    let mut batches = Vec::new();
    let mut builder = BatchBuilder::new(model.features);
    let mut chunk = DecodedChunk::default();
    for path in expand_patterns(patterns)? {
        let index = FileIndex::build(&path)?;
        let mut file = std::fs::File::open(&path)?;
        for meta in index.chunks() {
            read_chunk_into(&mut file, &path, meta, &mut chunk)?;
            add_chunk(model, &chunk, &path, meta.offset, batch_size, &mut builder, &mut batches)?;
        }
    }
    if !builder.is_empty() {
        batches.push(builder.take());
    }
    Ok(batches)
}

/// Trains `model` from `seed`'s initial values over `batches` for `passes`, one optimizer step
/// per batch, as a pserver would apply them.
pub fn train_locally(
    model: &ModelConfig,
    optimizer: &OptimizerConfig,
    batches: &[Batch],
    passes: u32,
    seed: u64,
) -> anyhow::Result<LocalRun> {
    let mut params = model.init(seed);
    let mut state: Vec<Vec<Vec<f32>>> =
        params.values().map(|values| optimizer.kind.initial_slots(values.len())).collect();
    let started = Instant::now();
    let mut examples = 0;
    for update in 1..=u64::from(passes) * batches.len() as u64 {
        let batch = &batches[((update - 1) % batches.len() as u64) as usize];
        let (_, gradient) = model.loss_and_gradient(&params, batch)?;
        for ((name, values), slots) in params.iter_mut().zip(state.iter_mut()) {
            let mut slots: Vec<&mut [f32]> = slots.iter_mut().map(Vec::as_mut_slice).collect();
            optimizer::apply(optimizer, values, &mut slots, &gradient[name], update);
        }
        examples += batch.len() as u64;
    }
    Ok(LocalRun { params, examples, elapsed: started.elapsed() })
}
