//! Conversions between the master's state types and protobuf messages, in one place.

use crate::state::{
    CheckpointMeta, ChunkRef, ClientStamp, SlotSecret, TaskAssignment, SLOT_SECRET_BYTES,
};
use client::TaskData;
use proto::master as pb;
use tonic::Status;

pub(crate) fn stamp(stamp: Option<pb::ClientStamp>) -> Result<ClientStamp, Status> {
    let stamp = stamp.ok_or_else(|| {
        Status::invalid_argument("stamp: missing (client id and sequence number)")
    })?;
    if stamp.client_id == 0 {
        return Err(Status::invalid_argument("stamp.client_id: must not be 0"));
    }
    Ok(ClientStamp { client_id: stamp.client_id, seq: stamp.seq })
}

pub(crate) fn chunk(chunk: &ChunkRef) -> pb::Chunk {
    pb::Chunk {
        path: chunk.path.clone(),
        offset: chunk.offset,
        compressed_size: chunk.compressed_size,
        record_count: chunk.record_count,
    }
}

/// A task assignment with what it covers: its chunks, or its index range (and no chunks),
/// and the job's shuffle seed if it has one.
pub(crate) fn task(
    assignment: &TaskAssignment,
    (data, shuffle_seed): (&TaskData, Option<u64>),
) -> pb::Task {
    let (kind, chunks, (range_start, range_end)) = match data {
        TaskData::Chunks(chunks) => {
            (pb::task::Kind::Chunks, chunks.iter().map(chunk).collect(), (0, 0))
        }
        TaskData::IndexRange { start, end } => {
            (pb::task::Kind::IndexRange, Vec::new(), (*start, *end))
        }
    };
    pb::Task {
        task_id: assignment.task_id,
        epoch: assignment.epoch,
        pass_index: assignment.pass,
        chunks,
        deadline_ms: assignment.deadline_ms,
        kind: kind as i32,
        range_start,
        range_end,
        shuffle_seed,
    }
}

/// A slot generation from a request: the claim never hands out 0, so 0 (an unset field) is a
/// caller that forgot it.
pub(crate) fn generation(generation: u64) -> Result<u64, Status> {
    if generation == 0 {
        return Err(Status::invalid_argument(
            "generation: missing (the generation ClaimPServerSlot returned)",
        ));
    }
    Ok(generation)
}

/// A claim's secret from a request: exactly [`SLOT_SECRET_BYTES`] bytes. An empty field is a
/// pserver older than this master (it sends none) and must be upgraded.
pub(crate) fn secret(bytes: &[u8]) -> Result<SlotSecret, Status> {
    SlotSecret::from_bytes(bytes).ok_or_else(|| {
        Status::invalid_argument(format!(
            "secret: must be the {SLOT_SECRET_BYTES} bytes the pserver drew for its claim, got {} \
             (a pserver older than this master sends none: upgrade it)",
            bytes.len()
        ))
    })
}

pub(crate) fn checkpoint_from_proto(
    meta: Option<pb::CheckpointMeta>,
) -> Result<CheckpointMeta, Status> {
    let meta = meta.ok_or_else(|| Status::invalid_argument("meta: missing checkpoint metadata"))?;
    if meta.path.is_empty() {
        return Err(Status::invalid_argument("meta.path: must name the checkpoint file"));
    }
    Ok(CheckpointMeta {
        path: meta.path,
        step: meta.step,
        crc32: meta.crc32,
        created_ms: meta.created_ms,
    })
}
