//! The leader's scan of a reported dataset: expand the patterns, index every file from its
//! chunk headers, and list the chunks in order. Runs before anything is proposed, so a missing
//! or corrupt file is refused with its name and offset and the replicated state is untouched.
//!
//! A report comes from any client, so the scan is bounded: it reads only under `--data-root`
//! when one is given (`data_root.rs`), and counts every entry, file and chunk as it goes
//! (`budget.rs`), stopping at the first cap passed, when its time is up, or when its request
//! is dropped.

mod budget;
mod data_root;
#[cfg(test)]
mod tests;

pub(crate) use budget::{ScanBudget, ScanLimits};
pub(crate) use data_root::DataRoot;

use crate::state::{ChunkList, ReportedFile, CHUNK_PATH_BYTES_MAX};
use budget::Cap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use storage::recordio::{expand_pattern_guarded, ExpandGuard, FileIndex, RecordIoError};

/// The most patterns one report may carry: far more than any real dataset spells out (they
/// use globs), few enough that expanding them is cheap to refuse.
pub(crate) const PATTERN_COUNT_MAX: usize = 1024;
/// The longest pattern accepted: a pattern naming one file must fit the state's path cap.
pub(crate) const PATTERN_BYTES_MAX: usize = CHUNK_PATH_BYTES_MAX;
/// The most directory entries one scan looks at, over all its patterns: sixteen per file the
/// dataset may hold, room for directories holding other files too. A glob over a symbolic
/// link loop reaches it in about a second and is refused naming the pattern.
pub(crate) const SCAN_ENTRY_COUNT_MAX: u64 = 1 << 20;
/// The most files one dataset may name: datasets are sharded into hundreds or thousands of
/// files, each holding many chunks.
pub(crate) const DATASET_FILE_COUNT_MAX: usize = 1 << 16;
/// The most bytes all the dataset's file paths may take: 256 bytes for each of the most files.
pub(crate) const DATASET_PATH_BYTES_MAX: usize = 16 << 20;
/// The longest one scan may take, wall clock. Indexing reads 20 bytes per chunk, so even a
/// dataset of `CHUNK_COUNT_MAX` chunks on a slow disk fits; a client's own deadline (2 s per
/// attempt by default) usually ends a scan sooner, through the cancel flag.
pub(crate) const SCAN_MS_MAX: u64 = 60_000;

/// Why a scan refused a dataset; each message names the pattern or the file, and never holds
/// bytes read from a file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScanError {
    #[error(transparent)]
    RecordIo(#[from] RecordIoError),
    #[error(
        "pattern {pattern:?}: {} lies outside --data-root {} once `..` and symbolic links are \
         resolved; refused without opening it",
        path.display(),
        root.display()
    )]
    OutsideRoot { pattern: String, path: PathBuf, root: PathBuf },
    #[error("pattern {pattern:?}: cannot resolve {}: {source}", path.display())]
    Unresolvable { pattern: String, path: PathBuf, source: std::io::Error },
    #[error(
        "{} (pattern {second:?}) is the file {} already names (pattern {first:?}): a dataset \
         names each file once",
        file.display(),
        first_file.display()
    )]
    NamedTwice { file: PathBuf, second: String, first_file: PathBuf, first: String },
    #[error(
        "{} (pattern {pattern:?}): the dataset passes the cap of {limit} {cap}; split it into \
         smaller jobs",
        file.display()
    )]
    Cap { cap: Cap, limit: u64, file: PathBuf, pattern: String },
    #[error(
        "pattern {pattern:?}: looked at more than {limit} directory entries \
         (SCAN_ENTRY_COUNT_MAX); a symbolic link loop, or a glob too broad"
    )]
    EntryLimit { pattern: String, limit: u64 },
    #[error("pattern {pattern:?}: the scan took {limit_ms} ms, its limit (SCAN_MS_MAX)")]
    TimeBudget { pattern: String, limit_ms: u64 },
    #[error(
        "no file matches {pattern:?} on the leader master ({where_read}): the masters read a \
         dataset's files, not the client; give the path as the masters see it"
    )]
    NoMatch { pattern: String, where_read: String },
    #[error("the scan stopped: its request was dropped")]
    Cancelled,
    #[error("the dataset scan did not finish: {reason}")]
    Interrupted { reason: String },
}

/// The chunks of a dataset, in pattern order, then file order, then offset order.
#[derive(Debug, PartialEq)]
pub(crate) struct ScannedDataset {
    pub(crate) chunks: ChunkList,
    pub(crate) record_count: u64,
}

/// One file of the dataset: where to open it and the path the state stores for it.
struct DatasetFile {
    path: PathBuf,
    text: String,
}

/// Scans synchronously; callers on the async runtime use `spawn_blocking`.
pub(crate) fn scan_dataset(
    patterns: &[String],
    root: Option<&DataRoot>,
    budget: &mut ScanBudget,
) -> Result<ScannedDataset, ScanError> {
    let mut chunks = ChunkList::default();
    let mut record_count = 0;
    for (pattern, files) in dataset_files(patterns, root, budget)? {
        budget.pattern = pattern;
        for file in files {
            let index = FileIndex::build_guarded(&file.path, |_| budget.chunk(&file.path))?;
            record_count += index.record_count();
            for chunk in index.chunks() {
                let (offset, size, count) =
                    (chunk.offset, chunk.compressed_size, chunk.record_count);
                chunks.push_span(&file.text, offset, size, count);
            }
        }
    }
    Ok(ScannedDataset { chunks, record_count })
}

/// The files `patterns` name, in scan order, with their sizes: what a repeated report is
/// compared on before any header is read. Expanded, confined and capped as a scan is, so a
/// repeat is never answered for a dataset a scan would refuse.
pub(crate) fn reported_files(
    patterns: &[String],
    root: Option<&DataRoot>,
    budget: &mut ScanBudget,
) -> Result<Vec<ReportedFile>, ScanError> {
    let mut reported = Vec::new();
    for (pattern, files) in dataset_files(patterns, root, budget)? {
        for file in files {
            let metadata = std::fs::metadata(&file.path).map_err(|source| {
                ScanError::Unresolvable { pattern: pattern.clone(), path: file.path, source }
            })?;
            reported.push(ReportedFile { path: file.text, bytes: metadata.len() });
        }
    }
    Ok(reported)
}

/// Each pattern with the files it names: expanded under the root (if any), each file
/// resolved, named once in the whole dataset, and counted against the caps.
fn dataset_files(
    patterns: &[String],
    root: Option<&DataRoot>,
    budget: &mut ScanBudget,
) -> Result<Vec<(String, Vec<DatasetFile>)>, ScanError> {
    // Resolved path -> the path and pattern that first named it.
    let mut named: HashMap<PathBuf, (PathBuf, String)> = HashMap::new();
    let mut dataset = Vec::new();
    for pattern in patterns {
        budget.pattern = pattern.clone();
        let mut files = Vec::new();
        for path in expand(pattern, root, budget)? {
            let Some(resolved) = resolve(pattern, &path, root)? else {
                continue; // Removed since it was listed: as if it never matched.
            };
            if let Some((first_file, first)) = named.get(&resolved) {
                let (first_file, first) = (first_file.clone(), first.clone());
                return Err(ScanError::NamedTwice {
                    file: path,
                    second: pattern.clone(),
                    first_file,
                    first,
                });
            }
            named.insert(resolved.clone(), (path.clone(), pattern.clone()));
            // Under a root the state keeps the resolved path: the one that was checked.
            let path = if root.is_some() { resolved } else { path };
            let text = path.display().to_string();
            budget.file(&path, &text)?;
            files.push(DatasetFile { path, text });
        }
        if files.is_empty() {
            return Err(ScanError::NoMatch {
                pattern: pattern.clone(),
                where_read: where_read(pattern, root),
            });
        }
        dataset.push((pattern.clone(), files));
    }
    Ok(dataset)
}

/// Where the masters looked for `pattern`'s files, for an error a client reads on another
/// machine: under the root, or for a relative pattern in the master's working directory.
fn where_read(pattern: &str, root: Option<&DataRoot>) -> String {
    match root {
        Some(root) => format!("looked for under --data-root {}", root.path().display()),
        None if Path::new(pattern).is_absolute() => "an absolute path".to_string(),
        None => match std::env::current_dir() {
            Ok(directory) => format!("relative to its working directory {}", directory.display()),
            Err(_) => "relative to its working directory".to_string(),
        },
    }
}

/// The files one pattern matches, looked for under the root only.
fn expand(
    pattern: &str,
    root: Option<&DataRoot>,
    budget: &mut ScanBudget,
) -> Result<Vec<PathBuf>, ScanError> {
    budget.check_alive()?;
    let base = match root {
        Some(root) => {
            root.check_pattern(pattern)?;
            root.path()
        }
        None => Path::new(""),
    };
    let mut walk = Walk { pattern, root, budget };
    expand_pattern_guarded(base, pattern, &mut walk)
}

/// `path` resolved: under the root, if there is one; `None` if it is gone.
fn resolve(
    pattern: &str,
    path: &Path,
    root: Option<&DataRoot>,
) -> Result<Option<PathBuf>, ScanError> {
    if let Some(root) = root {
        return root.resolve(pattern, path);
    }
    match std::fs::canonicalize(path) {
        Ok(resolved) => Ok(Some(resolved)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ScanError::Unresolvable {
            pattern: pattern.to_string(),
            path: path.to_owned(),
            source,
        }),
    }
}

/// The expansion of one pattern, seen step by step: counted, timed, cancellable, and kept
/// out of directories outside the root.
struct Walk<'a> {
    pattern: &'a str,
    root: Option<&'a DataRoot>,
    budget: &'a mut ScanBudget,
}

impl ExpandGuard for Walk<'_> {
    type Error = ScanError;

    fn visit_directory(&mut self, directory: &Path) -> Result<bool, ScanError> {
        self.budget.check_alive()?;
        match self.root {
            Some(root) => Ok(root.resolve(self.pattern, directory)?.is_some()),
            None => Ok(true),
        }
    }

    fn visit_entry(&mut self, _entry: &Path) -> Result<(), ScanError> {
        self.budget.entry()
    }
}
