//! The input features of a trainer's model when `--features` is not given: the dense length of
//! the first record of `--dataset`, or, for a trainer that joined a submitted job without
//! `--dataset`, of the first record of the job's first chunk (named by the masters).

use std::path::Path;

use anyhow::Context as _;
use client::ChunkRef;
use storage::recordio::{read_expected_chunk, DecodedChunk};

use crate::config::TrainerConfig;
use crate::joined_job::JoinedJob;

/// The feature count `config` asks for, else the one the data says.
pub async fn feature_count(config: &TrainerConfig, joined: &JoinedJob) -> anyhow::Result<usize> {
    if let Some(features) = config.features {
        return Ok(features);
    }
    let first = match (&config.dataset, &joined.first_chunk) {
        (Some(patterns), _) => first_record_of_files(patterns.clone()).await?,
        (None, Some(chunk)) => first_record_of_chunk(chunk.clone()).await?,
        (None, None) => anyhow::bail!(
            "the masters did not name job {}'s first chunk (a master older than this trainer): \
             pass --features or --dataset",
            config.job
        ),
    };
    let record = first.context("the dataset has no records: pass --features")?;
    dense_length(&record)
}

/// The first record of the files `patterns` name.
async fn first_record_of_files(patterns: Vec<String>) -> anyhow::Result<Option<Vec<u8>>> {
    let first = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<Vec<u8>>> {
        let mut scanner = storage::recordio::Scanner::open(&patterns)?;
        Ok(scanner.next().transpose()?)
    });
    first.await.context("reading the first record panicked")?
}

/// The first record of `chunk`, checked against what the masters recorded of it.
async fn first_record_of_chunk(chunk: ChunkRef) -> anyhow::Result<Option<Vec<u8>>> {
    let first = tokio::task::spawn_blocking(move || -> anyhow::Result<Option<Vec<u8>>> {
        let mut decoded = DecodedChunk::default();
        let path = Path::new(&chunk.path);
        read_expected_chunk(
            path,
            chunk.offset,
            chunk.compressed_size,
            chunk.record_count,
            &mut decoded,
        )
        .context("read the job's first chunk for its feature count (or pass --features)")?;
        let first = decoded.records().next().map(<[u8]>::to_vec);
        Ok(first)
    });
    first.await.context("reading the first record panicked")?
}

/// The dense length of an `Example` record.
fn dense_length(record: &[u8]) -> anyhow::Result<usize> {
    let example = <proto::example::Example as proto::Message>::decode(record)
        .context("the dataset's first record is not an Example")?;
    anyhow::ensure!(
        !example.dense.is_empty(),
        "the dataset's first record is sparse: pass --features"
    );
    Ok(example.dense.len())
}
