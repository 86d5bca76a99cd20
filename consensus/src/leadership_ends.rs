//! `LeadershipEnds`: tells in-flight batches when this node stops leading the term they were
//! proposed in. One task follows Raft's metrics and wakes every waiter through one `Notify`,
//! in the order they began waiting. (Each waiting on the metrics `watch` directly would be
//! simpler, but a tokio `watch` wakes its waiters in a random order, and the deterministic
//! simulation must replay the same order for the same seed.)

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use openraft::ServerState;
use tokio::sync::{watch, Notify};

use crate::ServerMetrics;

/// Cheap to clone: clones share the follower task's view.
#[derive(Clone)]
pub(crate) struct LeadershipEnds {
    inner: Arc<Inner>,
}

struct Inner {
    notify: Notify,
    /// Read for the latest metrics; only the follower task waits on it.
    metrics: watch::Receiver<ServerMetrics>,
    /// Raft stopped: its metrics will not change again.
    stopped: AtomicBool,
}

impl LeadershipEnds {
    /// Starts following `metrics` (the server metrics: the ones that change when leadership
    /// does, not at every entry).
    pub(crate) fn start(metrics: watch::Receiver<ServerMetrics>) -> Self {
        let inner = Arc::new(Inner {
            notify: Notify::new(),
            metrics: metrics.clone(),
            stopped: AtomicBool::new(false),
        });
        tokio::spawn(follow(metrics, Arc::clone(&inner)));
        Self { inner }
    }

    /// The term this node leads in now, if it leads.
    pub(crate) fn leading(&self) -> Option<u64> {
        leading_term(&self.inner.metrics.borrow())
    }

    /// Completes once this node no longer leads in `term`. Never completes for `None` (an
    /// entry proposed while not leading: openraft answers those at once) or once Raft has
    /// stopped (then openraft's answer is `Stopped`).
    pub(crate) async fn ended(&self, term: Option<u64>) {
        let Some(term) = term else {
            return std::future::pending().await;
        };
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.inner.stopped.load(Ordering::SeqCst) {
                return std::future::pending().await;
            }
            if self.leading() != Some(term) {
                return;
            }
            notified.await;
        }
    }
}

fn leading_term(metrics: &ServerMetrics) -> Option<u64> {
    (metrics.state == ServerState::Leader).then_some(metrics.vote.leader_id().get_term())
}

async fn follow(mut metrics: watch::Receiver<ServerMetrics>, inner: Arc<Inner>) {
    while metrics.changed().await.is_ok() {
        metrics.borrow_and_update();
        inner.notify.notify_waiters();
    }
    inner.stopped.store(true, Ordering::SeqCst);
    inner.notify.notify_waiters();
}
