//! The key-value service's `Load`: writers inside the node, writing through
//! [`ConsensusNode::write`] exactly as the `Put` handler does, minus the client's RPC.

use std::time::{Duration, Instant};

use proto::kv::{LoadReply, LoadRequest};
use tonic::Status;

use super::service::{KEYS_PER_WRITER, VALUE_BYTES_MAX, WRITERS_MAX};
use consensus::kv::{KvCommand, KvStore};
use consensus::ConsensusNode;

/// A load runs for ten minutes at most.
const MILLIS_MAX: u32 = 600_000;

/// Runs the requested writers to their deadline; the first failed write fails the load.
pub(crate) async fn run(
    node: &ConsensusNode<KvStore>,
    request: LoadRequest,
) -> Result<LoadReply, Status> {
    check(&request)?;
    let value = "v".repeat(request.value_bytes as usize);
    let started = Instant::now();
    let deadline = started + Duration::from_millis(u64::from(request.millis));
    let writers: Vec<_> = (0..request.writers)
        .map(|writer| tokio::spawn(write_until(node.clone(), writer, value.clone(), deadline)))
        .collect();
    let mut latencies_us = Vec::new();
    for writer in writers {
        let written = writer.await.map_err(|error| Status::internal(error.to_string()))?;
        latencies_us.extend(written?);
    }
    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    Ok(LoadReply { latencies_us, elapsed_us })
}

fn check(request: &LoadRequest) -> Result<(), Status> {
    let bad =
        |field: &str, max: u32| Status::invalid_argument(format!("{field} must be in 1..={max}"));
    if !(1..=WRITERS_MAX).contains(&request.writers) {
        return Err(bad("writers", WRITERS_MAX));
    }
    if !(1..=MILLIS_MAX).contains(&request.millis) {
        return Err(bad("millis", MILLIS_MAX));
    }
    if request.value_bytes > VALUE_BYTES_MAX {
        return Err(Status::invalid_argument(format!("value_bytes is over {VALUE_BYTES_MAX}")));
    }
    Ok(())
}

async fn write_until(
    node: ConsensusNode<KvStore>,
    writer: u32,
    value: String,
    deadline: Instant,
) -> Result<Vec<u32>, Status> {
    let mut latencies_us = Vec::new();
    let mut sequence = 0u64;
    while Instant::now() < deadline {
        let key = format!("local-{writer}-{}", sequence % KEYS_PER_WRITER);
        let command = KvCommand::Put { key, value: value.clone() };
        let started = Instant::now();
        node.write(command.encode())
            .await
            .map_err(|error| Status::unavailable(format!("writer {writer}: {error}")))?;
        latencies_us.push(u32::try_from(started.elapsed().as_micros()).unwrap_or(u32::MAX));
        sequence += 1;
    }
    Ok(latencies_us)
}
