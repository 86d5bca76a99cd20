//! Knowing when a closed log store has let go of its directory, so the same directory can be
//! opened again at once (a restart in the same process, or a retry after a bad configuration).
//!
//! sled releases its lock on `db` only when the last handle to the database is dropped, and
//! openraft's replication tasks may hold log readers for a moment after `Raft::shutdown`
//! returns. So closing waits for three things: every handle gone, the flusher thread joined,
//! and the lock on the database file free. A log without files (the simulation's) waits for
//! its handles only.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often closing checks whether the handles are gone and the lock is free.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// Held by the log store and by every log reader; the store is closed when none is left.
#[derive(Clone, Debug)]
pub struct OpenHandle {
    _token: Arc<()>,
}

/// Waits for a log store's files to be closed.
#[derive(Clone)]
pub struct LogStoreClosed {
    handles: Weak<()>,
    flusher: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// The sled database file whose lock must be free; `None` for a log without files.
    db_path: Option<PathBuf>,
}

impl LogStoreClosed {
    /// A handle for the store and the watcher of the database file `db_path`.
    pub(crate) fn new(flusher: JoinHandle<()>, db_path: PathBuf) -> (OpenHandle, Self) {
        Self::with_files(Some(flusher), Some(db_path))
    }

    /// For a log kept in memory: closed once its store and readers dropped their handles.
    pub fn in_memory() -> (OpenHandle, Self) {
        Self::with_files(None, None)
    }

    fn with_files(flusher: Option<JoinHandle<()>>, db_path: Option<PathBuf>) -> (OpenHandle, Self) {
        let token = Arc::new(());
        let closed = Self {
            handles: Arc::downgrade(&token),
            flusher: Arc::new(Mutex::new(flusher)),
            db_path,
        };
        (OpenHandle { _token: token }, closed)
    }

    /// Returns once no handle is left, the flusher thread has ended and sled's lock is free;
    /// an error says which of them was still pending after `timeout`.
    pub async fn wait(&self, timeout: Duration) -> Result<(), String> {
        let work = async {
            while self.handles.strong_count() > 0 {
                tokio::time::sleep(POLL_INTERVAL).await;
            }
            self.join_flusher().await;
            while !self.lock_is_free() {
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        };
        tokio::time::timeout(timeout, work).await.map_err(|_| {
            format!(
                "the Raft log {} was still open after {} ms ({} handles left)",
                self.db_path
                    .as_deref()
                    .map_or("in memory".into(), |path| path.display().to_string()),
                timeout.as_millis(),
                self.handles.strong_count()
            )
        })
    }

    async fn join_flusher(&self) {
        let thread = self.flusher.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take();
        if let Some(thread) = thread {
            // A panic in the flusher was already reported by the panic hook.
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// Takes and drops the same exclusive lock sled takes; a missing file (or none) counts
    /// as free.
    fn lock_is_free(&self) -> bool {
        let Some(db_path) = &self.db_path else {
            return true;
        };
        let Ok(file) = File::open(db_path) else {
            return true;
        };
        match file.try_lock() {
            Ok(()) => file.unlock().is_ok(),
            Err(_) => false,
        }
    }
}
