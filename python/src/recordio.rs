//! RecordIO for Python on the Rust code: reading one chunk a task names (checked against the
//! master's record: size, record count, CRC), scanning files and globs a chunk at a time, and
//! a writer whose file appears whole or not at all.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::sync::MutexExt;
use pyo3::types::PyBytes;
use storage::durable_file::DurableFile;
use storage::recordio::{ChunkScanner, Compressor, DecodedChunk, Writer, WriterOptions};

use crate::errors::{guarded, Failure};

/// The records of one chunk a task names, checked against what the master recorded: the
/// header's payload size and record count, then the payload's CRC. Fails with
/// `raftrain.DataError` naming the file and offset, and whose fault it is.
#[pyfunction]
pub fn read_task_chunk<'py>(
    py: Python<'py>,
    path: PathBuf,
    offset: u64,
    compressed_size: u32,
    record_count: u32,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    guarded("read_task_chunk", || {
        let mut chunk = DecodedChunk::default();
        py.detach(|| {
            storage::recordio::read_expected_chunk(
                &path,
                offset,
                compressed_size,
                record_count,
                &mut chunk,
            )
        })
        .map_err(Failure::from)?;
        Ok(records(py, &chunk))
    })
}

fn records<'py>(py: Python<'py>, chunk: &DecodedChunk) -> Vec<Bound<'py, PyBytes>> {
    chunk.records().map(|record| PyBytes::new(py, record)).collect()
}

/// Every record of some files (paths or globs, in the order `raftrain recordio cat` reads
/// them), a chunk at a time.
#[pyclass(module = "raftrain._native", frozen)]
pub struct ChunkReader {
    scanner: Mutex<ChunkScanner>,
}

#[pymethods]
impl ChunkReader {
    #[new]
    fn new(patterns: Vec<String>) -> PyResult<Self> {
        guarded("Reader", || {
            let scanner = ChunkScanner::open(&patterns).map_err(Failure::from)?;
            Ok(Self { scanner: Mutex::new(scanner) })
        })
    }

    /// The next chunk's records; `None` after the last. The lock is waited for detached from
    /// the interpreter: its holder detaches while it reads and must attach again to hand out
    /// the records, so a second thread waiting for the lock while attached (holding the GIL)
    /// deadlocked both.
    fn next_chunk<'py>(&self, py: Python<'py>) -> PyResult<Option<Vec<Bound<'py, PyBytes>>>> {
        guarded("Reader", || {
            let scanner = self.scanner.lock_py_attached(py);
            let mut scanner = scanner.unwrap_or_else(|poisoned| poisoned.into_inner());
            let scanner = &mut *scanner;
            match py.detach(|| scanner.next_chunk().map(|chunk| chunk.map(drop))) {
                None => Ok(None),
                Some(Err(error)) => Err(Failure::from(error).into()),
                Some(Ok(())) => Ok(Some(records(py, scanner.current()))),
            }
        })
    }
}

/// Writes records into chunks; the file appears under its name only at `close`.
#[pyclass(module = "raftrain._native", frozen)]
pub struct ChunkWriter {
    path: PathBuf,
    writer: Mutex<Option<Writer<DurableFile>>>,
}

#[pymethods]
impl ChunkWriter {
    #[new]
    #[pyo3(signature = (path, compressor="none", max_chunk_bytes=storage::recordio::DEFAULT_MAX_CHUNK_BYTES))]
    fn new(path: PathBuf, compressor: &str, max_chunk_bytes: usize) -> PyResult<Self> {
        guarded("Writer", || {
            let compressor: Compressor =
                compressor.parse().map_err(|error: storage::recordio::ParseCompressorError| {
                    Failure::invalid(error.to_string())
                })?;
            if max_chunk_bytes == 0 {
                return Err(Failure::invalid("max_chunk_bytes must be at least 1").into());
            }
            let file = create(&path)?;
            let writer = Writer::new(file, WriterOptions { compressor, max_chunk_bytes });
            Ok(Self { path, writer: Mutex::new(Some(writer)) })
        })
    }

    /// Adds one record.
    fn write(&self, record: &[u8]) -> PyResult<()> {
        guarded("Writer.write", || {
            let mut writer = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let writer = writer.as_mut().ok_or_else(|| self.closed())?;
            writer.write_record(record).map_err(|error| self.io_failure(&error))?;
            Ok(())
        })
    }

    /// Writes the last chunk and puts the file in place (temp file, fsync, rename).
    fn close(&self) -> PyResult<()> {
        guarded("Writer.close", || {
            let taken = self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
            let Some(writer) = taken else { return Ok(()) };
            let file = writer.finish().map_err(|error| self.io_failure(&error))?;
            file.commit().map_err(|error| self.io_failure(&error))?;
            Ok(())
        })
    }

    /// Drops what was written: no file appears (the temporary one is removed).
    fn abort(&self) {
        // Dropped uncommitted, the file removes its temporary one.
        drop(self.writer.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take());
    }
}

impl ChunkWriter {
    fn closed(&self) -> Failure {
        Failure::new(
            "FAILED_PRECONDITION",
            format!("{}: the writer is closed", self.path.display()),
        )
    }

    fn io_failure(&self, error: &std::io::Error) -> Failure {
        io_failure(&self.path, error)
    }
}

/// An I/O error of the file at `path` as the error class it stands for: a path that cannot be
/// written (`InvalidArgument`, `PermissionDenied`), a full disk (`ResourceExhausted`), else the
/// system's failure (`Internal`); the path said once.
fn io_failure(path: &Path, error: &std::io::Error) -> Failure {
    use std::io::ErrorKind;
    let code = match error.kind() {
        ErrorKind::InvalidInput
        | ErrorKind::NotFound
        | ErrorKind::IsADirectory
        | ErrorKind::NotADirectory
        | ErrorKind::AlreadyExists => "INVALID_ARGUMENT",
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => "PERMISSION_DENIED",
        ErrorKind::StorageFull | ErrorKind::QuotaExceeded => "RESOURCE_EXHAUSTED",
        _ => "INTERNAL",
    };
    let text = error.to_string();
    let shown = path.display().to_string();
    // A message that names the path already is not prefixed with it again.
    match text.starts_with(&shown) {
        true => Failure::new(code, text),
        false => Failure::new(code, format!("{shown}: {text}")),
    }
}

/// A `DurableFile` for `path` (written as `path.PID-N.tmp` until committed).
fn create(path: &Path) -> Result<DurableFile, Failure> {
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| Failure::invalid(format!("{}: not a file name", path.display())))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    // A temporary name of this writer's own: two writers of one path each write theirs whole
    // and the last closed stays (`path.tmp` alone was removed under the first by the second).
    static WRITERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let writer = WRITERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let stem = format!("{name}.{}-{writer}", std::process::id());
    DurableFile::create_as(dir, name, &stem).map_err(|error| io_failure(path, &error))
}
