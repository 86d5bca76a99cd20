//! An output file that appears whole or not at all: written to a temporary file beside the
//! destination, synced, then renamed over it. Dropping it without `commit` leaves nothing.
//! Like storage's durable files, it replaces only a regular file: a symbolic link, a device,
//! a fifo or a directory at the destination is refused naming it (`check_target`).

use anyhow::Context as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Buffer size for writing datasets: large enough to amortise system calls.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

pub(crate) struct OutputFile {
    destination: PathBuf,
    file: BufWriter<tempfile::NamedTempFile>,
}

impl OutputFile {
    pub(crate) fn create(destination: &Path) -> anyhow::Result<Self> {
        storage::durable_file::check_target(destination)?;
        let directory = match destination.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let temporary = tempfile::Builder::new()
            .prefix(".raftrain-partial-")
            .tempfile_in(directory)
            .with_context(|| format!("create a temporary file in {}", directory.display()))?;
        Ok(Self {
            destination: destination.to_path_buf(),
            file: BufWriter::with_capacity(WRITE_BUFFER_BYTES, temporary),
        })
    }

    pub(crate) fn writer(&mut self) -> &mut impl Write {
        &mut self.file
    }

    /// Flushes, syncs and renames the file into place.
    pub(crate) fn commit(self) -> anyhow::Result<()> {
        let temporary = self.file.into_inner().context("flush the output file")?;
        temporary.as_file().sync_all().context("sync the output file")?;
        // Checked again: something may have appeared there while the file was written.
        storage::durable_file::check_target(&self.destination)?;
        temporary
            .persist(&self.destination)
            .with_context(|| format!("rename the output into {}", self.destination.display()))?;
        Ok(())
    }
}
