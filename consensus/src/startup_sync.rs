//! What the Raft log finds at start-up is made durable before anything is answered from it.
//!
//! A process that crashed left writes in the page cache that never reached the disk: appends
//! openraft was not yet told of, a vote not yet synced. The next process reads them back from
//! sled as if they were durable, and would acknowledge them (an entry to its leader, a vote to
//! a candidate, the start of `DurableLog` at the last entry) without a sync; a power loss then
//! could lose an acknowledged entry or let this node vote twice in a term. So opening the log
//! `sync_all`s every file under its directory, then the directories themselves, children
//! first, then the directory that holds it (so the names are durable too), before the store is
//! returned to anyone who could read it. sled's own `flush` would not do: it is
//! `sync_file_range` on Linux, which makes nothing durable.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Syncs one file or directory; the production seam opens it and calls `sync_all`.
pub(crate) type SyncPath<'a> = &'a mut dyn FnMut(&Path) -> io::Result<()>;

/// `sync_all` on `path` (a file or a directory: both open read-only on Linux).
pub(crate) fn sync_all(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// Syncs every regular file under `dir`, then every directory under it (deepest first),
/// `dir` itself, and the directory that holds it. The first failure is returned, naming
/// the path.
pub(crate) fn sync_tree(dir: &Path, sync: SyncPath<'_>) -> Result<(), String> {
    let (mut files, mut dirs) = (Vec::new(), vec![dir.to_path_buf()]);
    let mut next = 0;
    while let Some(current) = dirs.get(next).cloned() {
        next += 1;
        for (path, is_dir) in entries(&current)? {
            if is_dir {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    let parent = dir.parent().filter(|parent| !parent.as_os_str().is_empty());
    let ordered = files.iter().chain(dirs.iter().rev()).map(PathBuf::as_path).chain(parent);
    for path in ordered {
        sync(path).map_err(|error| format!("cannot sync {}: {error}", path.display()))?;
    }
    Ok(())
}

/// The entries of `dir`, each with whether it is a directory (symbolic links are not
/// followed: sled makes none).
fn entries(dir: &Path) -> Result<Vec<(PathBuf, bool)>, String> {
    let failed = |error: io::Error| format!("cannot list {}: {error}", dir.display());
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        let kind = entry.file_type().map_err(failed)?;
        if kind.is_dir() || kind.is_file() {
            entries.push((entry.path(), kind.is_dir()));
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use openraft::storage::RaftLogStorage;
    use openraft::{CommittedLeaderId, LogId};

    use super::*;
    use crate::log_store::LogStore;

    /// Every file under `dir`, recursively.
    fn files_under(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for (path, is_dir) in entries(dir).expect("the log directory lists") {
            if is_dir {
                files.extend(files_under(&path));
            } else {
                files.push(path);
            }
        }
        files
    }

    /// Opening a log syncs every file it holds, then its directory, then the directory that
    /// holds it, before the store is returned (so before anything is read from it), whether
    /// the previous process left nothing or writes it never synced (here a committed log id,
    /// which the store writes without a sync). Each row: how many unsynced writes the
    /// previous process made before it stopped.
    #[tokio::test]
    async fn opening_a_log_syncs_what_it_finds_before_answering() {
        for unsynced_writes in [0u64, 1, 50] {
            let data_dir = tempfile::tempdir().expect("a temp dir");
            let dir = data_dir.path().join("sled");
            let (mut store, closed) = LogStore::open(&dir).expect("an empty log opens");
            for index in 1..=unsynced_writes {
                let committed = Some(LogId::new(CommittedLeaderId::new(1, 1), index));
                store.save_committed(committed).await.expect("the write succeeds");
            }
            drop(store);
            let released = closed.wait(std::time::Duration::from_secs(30)).await;
            released.expect("the store lets go of its files");

            let mut synced = Vec::new();
            let mut record = |path: &Path| {
                synced.push(path.to_path_buf());
                Ok(())
            };
            let (mut store, _closed) =
                LogStore::open_with(&dir, &mut record).expect("the log opens again");
            let row = format!("{unsynced_writes} unsynced writes: synced {synced:?}");
            for file in files_under(&dir) {
                let at = synced.iter().position(|path| *path == file);
                let dir_at = synced.iter().position(|path| *path == dir);
                assert!(at.is_some() && at < dir_at, "{row}: {} not synced first", file.display());
            }
            assert_eq!(synced.last().map(PathBuf::as_path), Some(data_dir.path()), "{row}");
            let committed = store.read_committed().await.expect("the log reads");
            let expected = (unsynced_writes > 0).then_some(unsynced_writes);
            assert_eq!(committed.map(|log_id| log_id.index), expected, "{row}: read back");
        }
    }
}
