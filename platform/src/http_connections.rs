//! `HttpConnections`: the open connections of the metrics port, so that a full port makes room
//! for a new one instead of refusing it. Without this, about 6,600 connections that each sent
//! a byte every 30 s held the port full and `/healthz` went unanswered (issue 35): a liveness
//! probe refused that way restarts the process. When the port is full, the connection accepted
//! first among those with no request in progress (still sending its headers, or idle between
//! requests) is closed to let the new one in. A scrape or probe in progress is never closed;
//! a client that dribbles its headers is, and the header-read bound closes it anyway.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Every open connection of one port, in the order they were accepted.
#[derive(Debug, Default)]
pub(crate) struct HttpConnections {
    open: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    /// By id: ids grow, so the first entries are the oldest connections.
    by_id: BTreeMap<u64, Arc<ConnectionState>>,
}

/// What the port knows of one connection.
#[derive(Debug, Default)]
pub(crate) struct ConnectionState {
    /// Requests in progress (their response not yet fully sent).
    busy: AtomicUsize,
    /// Requests received so far: none means it is still sending its first headers.
    started: AtomicUsize,
    evicted: AtomicBool,
    evict: Notify,
}

impl ConnectionState {
    /// Resolves once the connection was chosen to make room (at once if it already was).
    pub(crate) async fn evicted(&self) {
        self.evict.notified().await;
    }

    /// Whether a request has arrived on the connection yet.
    pub(crate) fn has_started(&self) -> bool {
        self.started.load(Ordering::Relaxed) > 0
    }

    /// Counts a request in progress until the returned guard is dropped (with its response).
    pub(crate) fn begin_request(self: &Arc<Self>) -> RequestInProgress {
        self.started.fetch_add(1, Ordering::Relaxed);
        self.busy.fetch_add(1, Ordering::Relaxed);
        RequestInProgress(self.clone())
    }
}

/// A request in progress; its connection is not evicted while it lives.
#[derive(Debug)]
pub(crate) struct RequestInProgress(Arc<ConnectionState>);

impl Drop for RequestInProgress {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One connection's place in the table, removed when dropped (the connection closed).
#[derive(Debug)]
pub(crate) struct Registered {
    connections: Arc<HttpConnections>,
    id: u64,
    pub(crate) state: Arc<ConnectionState>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.connections.table().by_id.remove(&self.id);
    }
}

impl HttpConnections {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every update is one step: the table is whole whatever panicked while holding it.
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Adds a connection just accepted.
    pub(crate) fn register(self: &Arc<Self>) -> Registered {
        let state = Arc::new(ConnectionState::default());
        let mut table = self.table();
        let id = table.next_id;
        table.next_id += 1;
        table.by_id.insert(id, state.clone());
        Registered { connections: self.clone(), id, state }
    }

    /// Tells the oldest connection with no request in progress, not already told, to close;
    /// `false` when every connection is serving a request.
    pub(crate) fn evict_idlest(&self) -> bool {
        let table = self.table();
        let idle = table.by_id.values().find(|state| {
            state.busy.load(Ordering::Relaxed) == 0 && !state.evicted.load(Ordering::Relaxed)
        });
        let Some(state) = idle else { return false };
        state.evicted.store(true, Ordering::Relaxed);
        // `notify_one` keeps the wake-up for a connection not yet waiting for it.
        state.evict.notify_one();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oldest idle connection goes first; a busy one is never chosen, and none is chosen
    /// twice.
    #[test]
    fn eviction_takes_the_oldest_idle_connection() {
        let connections = Arc::new(HttpConnections::default());
        let (first, second, third) =
            (connections.register(), connections.register(), connections.register());
        let _request = first.state.begin_request();
        assert!(connections.evict_idlest());
        assert!(second.state.evicted.load(Ordering::Relaxed));
        assert!(!first.state.evicted.load(Ordering::Relaxed));
        assert!(connections.evict_idlest());
        assert!(third.state.evicted.load(Ordering::Relaxed));
        assert!(!connections.evict_idlest(), "only the busy one is left");
        drop(second);
        assert_eq!(connections.table().by_id.len(), 2);
    }
}
