//! Pserver checkpoint files: one slot's shard (every block's values, optimizer state vectors
//! and update count) with the job's layout, written in one stream and checked whole on read.
//!
//! Layout, little-endian throughout:
//! ```text
//! magic "RTCKPT01"
//! body:
//!   version u32 (1), slot u32, slot_count u32, block_elements u32,
//!   generation u64, step u64,
//!   optimizer: u32 length + bytes (opaque to storage)
//!   params: u32 count, each: name (u32 length + UTF-8), rank u32, rank x u64 dims
//!   blocks, each: tag u8 = 1, name (u32 length + UTF-8), block u32, updates u64,
//!                 elements u32, slot count u8, values (elements x f32),
//!                 each slot (elements x f32)
//!   tag u8 = 0 (end of blocks)
//! trailer: body length u64, crc32 of the body u32, magic "RTCKEND1"
//! ```
//! A reader checks the frame first and bounds every length inside by its limit and by the body
//! bytes that remain; a body whose crc does not match is refused as damaged, whatever it holds.

mod cursor;
mod dir;
mod error;
mod reader;
mod seam;
mod writer;

pub use dir::CheckpointDir;
pub use error::CheckpointError;
pub use reader::read_checkpoint;
pub use writer::{CheckpointWriter, WrittenCheckpoint};

pub(crate) const MAGIC: [u8; 8] = *b"RTCKPT01";
pub(crate) const TRAILER_MAGIC: [u8; 8] = *b"RTCKEND1";
pub(crate) const TRAILER_BYTES: usize = 8 + 4 + 8;
pub(crate) const VERSION: u32 = 1;
pub(crate) const TAG_BLOCK: u8 = 1;
pub(crate) const TAG_END: u8 = 0;

/// A parameter or block name's length limit.
pub const NAME_BYTES_MAX: usize = 1024;
/// A parameter's rank limit.
pub const RANK_MAX: usize = 8;
/// Parameters per file.
pub const PARAM_COUNT_MAX: usize = 1 << 20;
/// Elements per block.
pub const BLOCK_ELEMENTS_MAX: u32 = 1 << 24;
/// Optimizer state vectors per block.
pub const SLOT_COUNT_MAX: usize = 4;
/// The opaque optimizer setting's size limit.
pub const OPTIMIZER_BYTES_MAX: usize = 64 << 10;

/// One parameter of the job: its name and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamShape {
    pub name: String,
    pub shape: Vec<u64>,
}

/// What a checkpoint says about itself and the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointHeader {
    pub slot: u32,
    pub slot_count: u32,
    pub block_elements: u32,
    pub generation: u64,
    pub step: u64,
    /// The pserver's encoding of its optimizer setting, at most [`OPTIMIZER_BYTES_MAX`].
    pub optimizer: Vec<u8>,
    /// Every parameter of the job, in order.
    pub params: Vec<ParamShape>,
}

/// One block as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointBlock {
    pub name: String,
    pub block: u32,
    pub updates: u64,
    pub values: Vec<f32>,
    pub slots: Vec<Vec<f32>>,
}

/// A whole checkpoint as read back, with the body's crc32 (what the master recorded).
#[derive(Clone, Debug, PartialEq)]
pub struct Checkpoint {
    pub header: CheckpointHeader,
    pub blocks: Vec<CheckpointBlock>,
    pub crc32: u32,
}

/// The file name of a checkpoint: slot, step and generation, so names sort by step and two
/// holders of one slot never write the same file.
pub fn file_name(slot: u32, step: u64, generation: u64) -> String {
    format!(
        "{}{slot:05}-step-{step:020}-gen-{generation:020}{}",
        dir::FILE_PREFIX,
        dir::FILE_SUFFIX
    )
}

/// What a checkpoint file's name says: (slot, step, generation); `None` for any other name.
pub fn parse_file_name(name: &str) -> Option<(u32, u64, u64)> {
    dir::parse_name(name).map(|parts| (parts.slot, parts.step, parts.generation))
}

#[cfg(test)]
mod tests;
