//! `read_checkpoint`: checks a checkpoint file's frame (magic, trailer, body length), then
//! streams the body, hashing it as it parses, every length bounded by its limit and by the bytes
//! that remain. The crc decides first: a body that does not parse is reported as damaged when
//! its crc does not match, and by what does not parse only when it does.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::cursor::Cursor;
use super::error::CheckpointError;
use super::seam;
use super::{
    Checkpoint, CheckpointBlock, CheckpointHeader, ParamShape, BLOCK_ELEMENTS_MAX, MAGIC,
    NAME_BYTES_MAX, OPTIMIZER_BYTES_MAX, PARAM_COUNT_MAX, RANK_MAX, SLOT_COUNT_MAX, TAG_BLOCK,
    TAG_END, TRAILER_BYTES, TRAILER_MAGIC, VERSION,
};

/// Bodies from this size on are read by two threads at once, each parsing and hashing one
/// part (cut at a block's start), the hashes combined: the page-cache copy, the zeroing of
/// the blocks' memory and the crc are split over two cores.
const SPLIT_READ_BYTES_MIN: u64 = 16 << 20;

/// Reads and checks the checkpoint at `path`.
pub fn read_checkpoint(path: &Path) -> Result<Checkpoint, CheckpointError> {
    let mut file = File::open(path).map_err(CheckpointError::io(path))?;
    let (body_bytes, crc) = frame(path, &mut file)?;
    let base = MAGIC.len() as u64;
    let scan = file.try_clone().map_err(CheckpointError::io(path))?;
    let mut head = Cursor::new(path, file, base, body_bytes);
    let header = header(&mut head);
    let seam = match header.is_ok() && body_bytes >= SPLIT_READ_BYTES_MIN {
        true => seam::seam(&scan, base, head.position(), body_bytes, body_bytes / 2),
        false => None,
    };
    let (blocks, hasher) = match seam {
        Some(seam) => read_split(path, head, seam, body_bytes)?,
        None => {
            let blocks = match &header {
                Ok(_) => blocks(&mut head, true),
                Err(_) => Ok(Vec::new()),
            };
            (blocks, head.finish()?)
        }
    };
    let actual = hasher.finalize();
    if actual != crc {
        return Err(CheckpointError::Corrupt {
            path: path.to_path_buf(),
            offset: base,
            reason: format!("checksum mismatch: trailer {crc:#010x}, body {actual:#010x}"),
        });
    }
    Ok(Checkpoint { header: header?, blocks: blocks?, crc32: crc })
}

type Parsed = Result<Vec<CheckpointBlock>, CheckpointError>;

/// Reads the blocks before body offset `seam` with `head` and those from it on with a thread
/// of its own; the blocks in order (or the first error), and the whole body's hash.
fn read_split(
    path: &Path,
    mut head: Cursor<'_>,
    seam: u64,
    body_bytes: u64,
) -> Result<(Parsed, crc32fast::Hasher), CheckpointError> {
    let base = MAGIC.len() as u64;
    let mut tail_file = File::open(path).map_err(CheckpointError::io(path))?;
    tail_file.seek(SeekFrom::Start(base + seam)).map_err(CheckpointError::io(path))?;
    head.limit(seam);
    std::thread::scope(|scope| {
        let tail = scope.spawn(move || {
            let mut cursor = Cursor::new(path, tail_file, base + seam, body_bytes - seam);
            let blocks = blocks(&mut cursor, true);
            cursor.finish().map(|hasher| (blocks, hasher))
        });
        let head_blocks = blocks(&mut head, false);
        let mut hasher = head.finish()?;
        let (tail_blocks, tail_hasher) = tail.join().map_err(|_| CheckpointError::Io {
            path: path.to_path_buf(),
            error: std::io::Error::other("the reading thread panicked"),
        })??;
        hasher.combine(&tail_hasher);
        let blocks = head_blocks.and_then(|mut head| {
            head.extend(tail_blocks?);
            Ok(head)
        });
        Ok((blocks, hasher))
    })
}

/// Checks the magic and the trailer; the body's length and crc, with `file` at the body's
/// first byte.
fn frame(path: &Path, file: &mut File) -> Result<(u64, u32), CheckpointError> {
    let corrupt = |offset: u64, reason: String| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        offset,
        reason,
    };
    let io = CheckpointError::io(path);
    let file_bytes = file.metadata().map_err(CheckpointError::io(path))?.len();
    let least = (MAGIC.len() + TRAILER_BYTES) as u64;
    if file_bytes < least {
        return Err(corrupt(
            0,
            format!("{file_bytes} bytes is shorter than the {least}-byte frame: truncated"),
        ));
    }
    let trailer_at = file_bytes - TRAILER_BYTES as u64;
    let mut trailer = [0_u8; TRAILER_BYTES];
    let read_trailer =
        file.seek(SeekFrom::Start(trailer_at)).and_then(|_| file.read_exact(&mut trailer));
    read_trailer.map_err(CheckpointError::io(path))?;
    let mut magic = [0_u8; MAGIC.len()];
    file.seek(SeekFrom::Start(0)).and_then(|_| file.read_exact(&mut magic)).map_err(io)?;
    if magic != MAGIC {
        return Err(corrupt(0, "bad magic: not a raftrain checkpoint".into()));
    }
    if trailer[12..] != TRAILER_MAGIC {
        return Err(corrupt(
            trailer_at + 12,
            "no trailer: the file is truncated or has bytes appended".into(),
        ));
    }
    let body_bytes = u64::from_le_bytes(trailer[..8].try_into().expect("8 bytes"));
    let crc = u32::from_le_bytes(trailer[8..12].try_into().expect("4 bytes"));
    let actual = trailer_at - MAGIC.len() as u64;
    if body_bytes != actual {
        return Err(corrupt(
            trailer_at,
            format!("the trailer says {body_bytes} body bytes, the file has {actual}"),
        ));
    }
    Ok((body_bytes, crc))
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
    let mut params = Vec::with_capacity(
        param_count.min(usize::try_from(cursor.remaining() / 8).unwrap_or(usize::MAX)),
    );
    for _ in 0..param_count {
        let name = cursor.name(NAME_BYTES_MAX)?;
        let rank = cursor.length("rank", RANK_MAX)?;
        let shape = (0..rank).map(|_| cursor.u64("dimension")).collect::<Result<_, _>>()?;
        params.push(ParamShape { name, shape });
    }
    Ok(CheckpointHeader { slot, slot_count, block_elements, generation, step, optimizer, params })
}

/// The blocks up to the end tag (`ends_with_tag`, and nothing after it), or up to the end of
/// the cursor's range (a part that ends at a block's start).
fn blocks(cursor: &mut Cursor<'_>, ends_with_tag: bool) -> Parsed {
    let mut blocks = Vec::new();
    loop {
        if !ends_with_tag && cursor.remaining() == 0 {
            return Ok(blocks);
        }
        match cursor.u8("block tag")? {
            TAG_END if cursor.remaining() == 0 => return Ok(blocks),
            TAG_END => {
                let after = cursor.remaining();
                return Err(cursor.corrupt(format!("{after} bytes after the end of the blocks")));
            }
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
