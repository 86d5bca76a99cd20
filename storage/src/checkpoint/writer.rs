//! `CheckpointWriter`: streams a checkpoint to disk block by block (no copy of the whole shard
//! in memory), hashing the body as it goes, and commits it durably.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::CheckpointError;
use super::{
    file_name, CheckpointHeader, BLOCK_ELEMENTS_MAX, MAGIC, NAME_BYTES_MAX, OPTIMIZER_BYTES_MAX,
    PARAM_COUNT_MAX, RANK_MAX, SLOT_COUNT_MAX, TAG_BLOCK, TAG_END, TRAILER_MAGIC, VERSION,
};
use crate::durable_file::DurableFile;

/// Floats converted per write: big writes, one reused buffer.
const FLOATS_PER_WRITE: usize = 1 << 16;

/// Where a committed checkpoint landed, and what the master should record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WrittenCheckpoint {
    pub path: PathBuf,
    /// The body's crc32.
    pub crc32: u32,
    pub file_bytes: u64,
}

/// A checkpoint being written.
#[derive(Debug)]
pub struct CheckpointWriter {
    file: DurableFile,
    crc: crc32fast::Hasher,
    body_bytes: u64,
    buffer: Vec<u8>,
}

impl CheckpointWriter {
    /// Starts the checkpoint file for `header` in `dir`.
    pub fn create(dir: &Path, header: &CheckpointHeader) -> Result<Self, CheckpointError> {
        validate_header(dir, header)?;
        let name = file_name(header.slot, header.step, header.generation);
        let file =
            DurableFile::create(dir, &name).map_err(CheckpointError::io(&dir.join(&name)))?;
        let mut writer =
            Self { file, crc: crc32fast::Hasher::new(), body_bytes: 0, buffer: Vec::new() };
        writer.raw(&MAGIC)?;
        writer.header(header)?;
        Ok(writer)
    }

    /// Appends one block; `slots` are its optimizer state vectors, each as long as `values`.
    pub fn write_block(
        &mut self,
        name: &str,
        block: u32,
        updates: u64,
        values: &[f32],
        slots: &[&[f32]],
    ) -> Result<(), CheckpointError> {
        let invalid = |reason: String| CheckpointError::Invalid {
            path: self.file.path().to_path_buf(),
            reason,
        };
        if name.len() > NAME_BYTES_MAX
            || values.len() > BLOCK_ELEMENTS_MAX as usize
            || slots.len() > SLOT_COUNT_MAX
        {
            return Err(invalid(format!(
                "block {name}#{block}: name, element or slot count over its limit"
            )));
        }
        if slots.iter().any(|slot| slot.len() != values.len()) {
            return Err(invalid(format!(
                "block {name}#{block}: a state vector's length differs from the values'"
            )));
        }
        self.body(&[TAG_BLOCK])?;
        self.string(name)?;
        self.body(&block.to_le_bytes())?;
        self.body(&updates.to_le_bytes())?;
        self.body(&(values.len() as u32).to_le_bytes())?;
        self.body(&[slots.len() as u8])?;
        self.floats(values)?;
        for slot in slots {
            self.floats(slot)?;
        }
        Ok(())
    }

    /// Ends the body, writes the trailer and commits the file durably under a name no file
    /// had: [`CheckpointError::Exists`] if one did (that file stays as it was).
    pub fn finish(mut self) -> Result<WrittenCheckpoint, CheckpointError> {
        self.body(&[TAG_END])?;
        let crc32 = self.crc.clone().finalize();
        let body_bytes = self.body_bytes;
        self.raw(&body_bytes.to_le_bytes())?;
        self.raw(&crc32.to_le_bytes())?;
        self.raw(&TRAILER_MAGIC)?;
        let file_bytes = (MAGIC.len() + super::TRAILER_BYTES) as u64 + body_bytes;
        let path = self.file.path().to_path_buf();
        let path = self.file.commit_new().map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => CheckpointError::Exists { path: path.clone() },
            _ => CheckpointError::Io { path: path.clone(), error: source },
        })?;
        Ok(WrittenCheckpoint { path, crc32, file_bytes })
    }

    fn header(&mut self, header: &CheckpointHeader) -> Result<(), CheckpointError> {
        for word in [VERSION, header.slot, header.slot_count, header.block_elements] {
            self.body(&word.to_le_bytes())?;
        }
        self.body(&header.generation.to_le_bytes())?;
        self.body(&header.step.to_le_bytes())?;
        self.body(&(header.optimizer.len() as u32).to_le_bytes())?;
        self.body(&header.optimizer)?;
        self.body(&(header.params.len() as u32).to_le_bytes())?;
        for param in &header.params {
            self.string(&param.name)?;
            self.body(&(param.shape.len() as u32).to_le_bytes())?;
            for dim in &param.shape {
                self.body(&dim.to_le_bytes())?;
            }
        }
        Ok(())
    }

    fn string(&mut self, text: &str) -> Result<(), CheckpointError> {
        self.body(&(text.len() as u32).to_le_bytes())?;
        self.body(text.as_bytes())
    }

    fn floats(&mut self, values: &[f32]) -> Result<(), CheckpointError> {
        let mut buffer = std::mem::take(&mut self.buffer);
        for part in values.chunks(FLOATS_PER_WRITE) {
            buffer.resize(part.len() * 4, 0);
            for (bytes, value) in buffer.chunks_exact_mut(4).zip(part) {
                bytes.copy_from_slice(&value.to_le_bytes());
            }
            self.body(&buffer)?;
        }
        self.buffer = buffer;
        Ok(())
    }

    fn body(&mut self, bytes: &[u8]) -> Result<(), CheckpointError> {
        self.crc.update(bytes);
        self.body_bytes += bytes.len() as u64;
        self.raw(bytes)
    }

    fn raw(&mut self, bytes: &[u8]) -> Result<(), CheckpointError> {
        let path = self.file.path().to_path_buf();
        self.file.write_all(bytes).map_err(CheckpointError::io(&path))
    }
}

fn validate_header(dir: &Path, header: &CheckpointHeader) -> Result<(), CheckpointError> {
    let invalid = |reason: &str| {
        Err(CheckpointError::Invalid { path: dir.to_path_buf(), reason: reason.to_string() })
    };
    if header.optimizer.len() > OPTIMIZER_BYTES_MAX {
        return invalid("the optimizer setting is over its size limit");
    }
    if header.params.len() > PARAM_COUNT_MAX {
        return invalid("too many parameters");
    }
    if header
        .params
        .iter()
        .any(|param| param.name.len() > NAME_BYTES_MAX || param.shape.len() > RANK_MAX)
    {
        return invalid("a parameter name or rank is over its limit");
    }
    if header.block_elements > BLOCK_ELEMENTS_MAX {
        return invalid("block_elements is over its limit");
    }
    Ok(())
}
