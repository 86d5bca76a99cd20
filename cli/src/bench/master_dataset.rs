//! The dataset of `bench master`: one small record per chunk, so the task count is the chunk
//! count and the file stays small (about 30 bytes a task).

use anyhow::Context as _;
use std::path::Path;
use storage::recordio::{Writer, WriterOptions};

/// Writes `tasks` one-record chunks to `<dir>/dataset.recordio` and returns its path.
pub(crate) fn write(dir: &Path, tasks: u64) -> anyhow::Result<String> {
    let path = dir.join("dataset.recordio");
    let file =
        std::fs::File::create(&path).with_context(|| format!("create {}", path.display()))?;
    let buffered = std::io::BufWriter::new(file);
    let mut writer =
        Writer::new(buffered, WriterOptions { max_chunk_bytes: 1, ..WriterOptions::default() });
    for task_id in 0..tasks {
        writer.write_record(&task_id.to_le_bytes())?;
    }
    let buffered = writer.finish()?;
    buffered.into_inner().map_err(|error| error.into_error())?.sync_all()?;
    Ok(path.display().to_string())
}
