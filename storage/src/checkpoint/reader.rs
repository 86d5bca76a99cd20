//! `read_checkpoint`: reads a checkpoint file, checks its trailer and the body's crc, and only
//! then parses the body, every length bounded by its limit and by the bytes that remain.

use std::path::Path;

use super::cursor::Cursor;
use super::error::CheckpointError;
use super::{
    Checkpoint, CheckpointBlock, CheckpointHeader, ParamShape, BLOCK_ELEMENTS_MAX, MAGIC,
    NAME_BYTES_MAX, OPTIMIZER_BYTES_MAX, PARAM_COUNT_MAX, RANK_MAX, SLOT_COUNT_MAX, TAG_BLOCK,
    TAG_END, TRAILER_BYTES, TRAILER_MAGIC, VERSION,
};

/// Reads and checks the checkpoint at `path`.
pub fn read_checkpoint(path: &Path) -> Result<Checkpoint, CheckpointError> {
    let bytes = std::fs::read(path).map_err(CheckpointError::io(path))?;
    let (body, crc32) = checked_body(path, &bytes)?;
    let mut cursor = Cursor::new(path, body, MAGIC.len() as u64);
    let header = header(&mut cursor)?;
    let blocks = blocks(&mut cursor)?;
    if cursor.remaining() != 0 {
        return Err(
            cursor.corrupt(format!("{} bytes after the end of the blocks", cursor.remaining()))
        );
    }
    Ok(Checkpoint { header, blocks, crc32 })
}

/// The body between the magic and the trailer, once its length and crc check.
fn checked_body<'a>(path: &Path, bytes: &'a [u8]) -> Result<(&'a [u8], u32), CheckpointError> {
    let corrupt = |offset: usize, reason: String| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason,
    };
    let least = MAGIC.len() + TRAILER_BYTES;
    if bytes.len() < least {
        return Err(corrupt(
            0,
            format!("{} bytes is shorter than the {least}-byte frame: truncated", bytes.len()),
        ));
    }
    if bytes[..8] != MAGIC {
        return Err(corrupt(0, "bad magic: not a raftrain checkpoint".into()));
    }
    let trailer_at = bytes.len() - TRAILER_BYTES;
    let trailer = &bytes[trailer_at..];
    if trailer[12..] != TRAILER_MAGIC {
        return Err(corrupt(
            trailer_at + 12,
            "no trailer: the file is truncated or has bytes appended".into(),
        ));
    }
    let body_bytes = u64::from_le_bytes(trailer[..8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(trailer[8..12].try_into().expect("4 bytes"));
    let body = &bytes[MAGIC.len()..trailer_at];
    if body_bytes != body.len() as u64 {
        return Err(corrupt(
            trailer_at,
            format!("the trailer says {body_bytes} body bytes, the file has {}", body.len()),
        ));
    }
    let actual = crc32fast::hash(body);
    if actual != crc {
        return Err(corrupt(
            MAGIC.len(),
            format!("checksum mismatch: trailer {crc:#010x}, body {actual:#010x}"),
        ));
    }
    Ok((body, crc))
}

fn header(cursor: &mut Cursor<'_>) -> Result<CheckpointHeader, CheckpointError> {
    let version = cursor.u32("version")?;
    if version != VERSION {
        return Err(
            cursor.corrupt(format!("version {version} is unknown (this build reads {VERSION})"))
        );
    }
    let slot = cursor.u32("slot index")?;
    let slot_count = cursor.u32("slot count")?;
    let block_elements = cursor.u32("block elements")?;
    if block_elements == 0 || block_elements > BLOCK_ELEMENTS_MAX {
        return Err(cursor.corrupt(format!(
            "block elements {block_elements} is outside 1..={BLOCK_ELEMENTS_MAX}"
        )));
    }
    let generation = cursor.u64("generation")?;
    let step = cursor.u64("step")?;
    let optimizer_bytes = cursor.length("optimizer length", OPTIMIZER_BYTES_MAX)?;
    let optimizer = cursor.take(optimizer_bytes, "optimizer")?.to_vec();
    let param_count = cursor.length("parameter count", PARAM_COUNT_MAX)?;
    let mut params = Vec::with_capacity(param_count.min(cursor.remaining() / 8));
    for _ in 0..param_count {
        let name = cursor.name(NAME_BYTES_MAX)?;
        let rank = cursor.length("rank", RANK_MAX)?;
        let shape = (0..rank).map(|_| cursor.u64("dimension")).collect::<Result<_, _>>()?;
        params.push(ParamShape { name, shape });
    }
    Ok(CheckpointHeader { slot, slot_count, block_elements, generation, step, optimizer, params })
}

fn blocks(cursor: &mut Cursor<'_>) -> Result<Vec<CheckpointBlock>, CheckpointError> {
    let mut blocks = Vec::new();
    loop {
        match cursor.u8("block tag")? {
            TAG_END => return Ok(blocks),
            TAG_BLOCK => blocks.push(block(cursor)?),
            tag => return Err(cursor.corrupt(format!("block tag {tag} is neither 0 nor 1"))),
        }
    }
}

fn block(cursor: &mut Cursor<'_>) -> Result<CheckpointBlock, CheckpointError> {
    let name = cursor.name(NAME_BYTES_MAX)?;
    let block = cursor.u32("block index")?;
    let updates = cursor.u64("updates")?;
    let elements = cursor.length("element count", BLOCK_ELEMENTS_MAX as usize)?;
    let slot_count = cursor.u8("slot count")? as usize;
    if slot_count > SLOT_COUNT_MAX {
        return Err(cursor.corrupt(format!("{slot_count} state vectors; at most {SLOT_COUNT_MAX}")));
    }
    let values = cursor.floats(elements, "values")?;
    let slots = (0..slot_count)
        .map(|_| cursor.floats(elements, "state vector"))
        .collect::<Result<_, _>>()?;
    Ok(CheckpointBlock { name, block, updates, values, slots })
}
