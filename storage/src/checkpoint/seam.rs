//! `seam`: finds where a checkpoint's body can be cut in two for two threads to read at once:
//! the start of the first block at or after a target offset, found by walking the blocks'
//! small headers with positioned reads and skipping their floats. Every length is checked as
//! the parse checks it; anything unexpected answers `None` and the body is read in one pass,
//! where the parse names what is wrong.

use std::fs::File;
use std::os::unix::fs::FileExt as _;

use super::{BLOCK_ELEMENTS_MAX, NAME_BYTES_MAX, SLOT_COUNT_MAX, TAG_BLOCK};

/// Bytes of a block's header after its name: block u32, updates u64, elements u32, slots u8.
const AFTER_NAME_BYTES: usize = 4 + 8 + 4 + 1;

/// The body offset of the first block starting at or after `target`, walking from the block
/// at body offset `from`; the body is `body_bytes` long at file offset `base`.
pub(crate) fn seam(file: &File, base: u64, from: u64, body_bytes: u64, target: u64) -> Option<u64> {
    let mut at = from;
    while at < target {
        at = next_block(file, base, at, body_bytes)?;
    }
    (at < body_bytes).then_some(at)
}

/// The body offset just past the block at `at`.
fn next_block(file: &File, base: u64, at: u64, body_bytes: u64) -> Option<u64> {
    let mut tag_and_name = [0_u8; 5];
    file.read_exact_at(&mut tag_and_name, base + at).ok()?;
    if tag_and_name[0] != TAG_BLOCK {
        return None;
    }
    let name_bytes = u32::from_le_bytes(tag_and_name[1..].try_into().ok()?) as usize;
    if name_bytes > NAME_BYTES_MAX {
        return None;
    }
    let mut fields = [0_u8; AFTER_NAME_BYTES];
    let fields_at = at + 5 + name_bytes as u64;
    file.read_exact_at(&mut fields, base + fields_at).ok()?;
    let elements = u32::from_le_bytes(fields[12..16].try_into().ok()?);
    let slots = fields[16] as usize;
    if elements > BLOCK_ELEMENTS_MAX || slots > SLOT_COUNT_MAX {
        return None;
    }
    let floats = u64::from(elements) * 4 * (1 + slots as u64);
    let next = fields_at + AFTER_NAME_BYTES as u64 + floats;
    (next <= body_bytes).then_some(next)
}
