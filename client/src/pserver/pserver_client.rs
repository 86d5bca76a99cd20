//! `PServerClient`: init, push and pull across every slot of a job, riding out replaced
//! pservers: a slot whose holder is gone is waited for (the table follows the master), a new
//! holder restored from a checkpoint is simply used, and one that came up empty is
//! re-initialized from the last values this client pulled.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{MasterClient, PServerTable};
use bytes::Bytes;
use platform::unary::Segments;
use proto::pserver as pb;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tonic::Status;

use super::batches::{blocks_by_slot, empty_tensors, ids_by_slot, place, size_tensors};
use super::cache::Cache;
use super::error::PServerClientError;
use super::failure::{classify, Failure};
use super::model_basis::ModelBasis;
use super::routes::{Route, Routes};
use super::tensor_bytes::{shared_bytes, Tensors};
use crate::pserver::f32_bytes;
use crate::pserver::layout::JobLayout;
use crate::pserver::limits::REQUESTS_IN_FLIGHT_PER_SLOT_MAX;
use crate::pserver::placement::BlockId;

/// Between attempts on a slot that is not served right now.
pub(super) const RETRY_MS: u64 = 200;
/// Failed requests to a slot's holder in a row before the table is re-read through the
/// leader (the watch may be stale) ...
const FAILURES_BEFORE_REREAD_COUNT: u32 = 3;
/// ... or this long of failing, whichever comes first.
const FAILING_BEFORE_REREAD_MS: u64 = 2_000;
/// A call that waited this long for its slot logs a warning, and again every this long.
const WAITING_WARNING_MS: u64 = 15_000;

#[derive(Clone, Debug)]
pub struct PServerClientOptions {
    /// The deadline of one request (multi-MB payloads included).
    pub rpc_timeout: Duration,
    /// How long a slot may go unserved (a pserver being replaced) before a call fails; `None`
    /// (the default): as long as it takes, since a replacement may take minutes to schedule.
    pub replace_wait: Option<Duration>,
    /// How long to wait for another trainer's initialization.
    pub init_wait: Duration,
}

impl Default for PServerClientOptions {
    fn default() -> Self {
        Self {
            rpc_timeout: Duration::from_secs(30),
            replace_wait: None,
            init_wait: Duration::from_secs(300),
        }
    }
}

/// A trainer's view of the job's pservers. Cheap to clone.
#[derive(Clone, Debug)]
pub struct PServerClient {
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) routes: Routes,
    pub(super) initializer: u64,
    pub(super) options: PServerClientOptions,
    /// The newest values this client saw: what an empty replacement is initialized from.
    pub(super) cache: Mutex<Cache>,
    /// Calls waiting for a slot to be served right now (see `waiting_for_slot`).
    pub(super) waiting: AtomicUsize,
    /// The model restore of the last whole pull: what pushes are computed on.
    pub(super) basis: ModelBasis,
}

/// Counts one call as waiting for a slot while it lives.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A block's id and values as this client last saw them.
pub(super) type CachedBlock = (BlockId, Segments);

impl PServerClient {
    /// Follows `master`'s pserver table; `initializer` identifies this client (a trainer id).
    pub fn new(master: Arc<MasterClient>, initializer: u64, options: PServerClientOptions) -> Self {
        let inner = Inner {
            routes: Routes::follow(master),
            initializer,
            options,
            cache: Mutex::new(Cache::Empty),
            waiting: AtomicUsize::new(0),
            basis: ModelBasis::default(),
        };
        Self { inner: Arc::new(inner) }
    }

    /// Waits until every desired slot is held (for at most `timeout`, if given); the table
    /// then. A job the masters do not know is waited for too (it may be submitted later), and
    /// is what the timeout's error names.
    pub async fn wait_for_slots(
        &self,
        timeout: Option<Duration>,
    ) -> Result<PServerTable, PServerClientError> {
        let started = Instant::now();
        let _waiting = Waiting::new(&self.inner.waiting);
        loop {
            let table = self.inner.routes.table();
            if table.desired > 0 && table.pservers.len() == table.desired as usize {
                return Ok(table);
            }
            if let Some(waited) = timeout.filter(|timeout| started.elapsed() >= *timeout) {
                if let Some(job) = self.inner.routes.job_missing() {
                    return Err(PServerClientError::NoSuchJob { job: job.to_string(), waited });
                }
                let (held, desired) = (table.pservers.len(), table.desired);
                return Err(PServerClientError::SlotsNotHeld { held, desired, waited });
            }
            self.inner.routes.changed(Duration::from_millis(RETRY_MS)).await;
        }
    }

    /// Whether some call is waiting for a pserver slot to be served right now (or for every
    /// slot to be held): what a trainer's `/readyz` reports.
    pub fn waiting_for_slot(&self) -> bool {
        self.inner.waiting.load(Ordering::Relaxed) > 0
    }

    /// Offers `layout` and initial `values` to every slot; the first initializer of each slot
    /// wins and the others wait for it. Returns the layout the pservers serve, which must be
    /// `layout` (a `LayoutMismatch` otherwise).
    pub async fn init_or_wait(
        &self,
        layout: &JobLayout,
        values: &[(&str, &[f32])],
    ) -> Result<(), PServerClientError> {
        let requests = blocks_by_slot(layout, values, encoded);
        let mut tasks = JoinSet::new();
        for slot in 0..layout.slot_count {
            let client = self.clone();
            let (layout, batches) =
                (layout.clone(), requests.get(&slot).cloned().unwrap_or_default());
            tasks.spawn(async move { client.init_slot(slot, &layout, batches).await });
        }
        join_all(tasks).await?;
        *self.cache() = Cache::Blocks(
            requests
                .into_iter()
                .map(|(slot, batches)| (slot, batches.into_iter().map(cached).collect()))
                .collect(),
        );
        Ok(())
    }

    /// Applies `gradients` (name -> flat values, every tensor of the layout or some) on every
    /// slot, in parallel. A gradient is applied at most once. The values are copied once, as
    /// they are encoded; [`PServerClient::push_shared`] copies nothing.
    pub async fn push(
        &self,
        layout: &JobLayout,
        gradients: &[(&str, &[f32])],
    ) -> Result<(), PServerClientError> {
        check_tensors(layout, gradients)?;
        self.push_requests(layout, blocks_by_slot(layout, gradients, encoded)).await
    }

    /// Like [`PServerClient::push`], handing each block of `gradients` to the connection where
    /// it lies (a trainer gives its gradient away once it is computed).
    pub async fn push_shared(
        &self,
        layout: &JobLayout,
        gradients: Arc<Tensors>,
    ) -> Result<(), PServerClientError> {
        let borrowed: Vec<(&str, &[f32])> =
            gradients.iter().map(|(name, values)| (name.as_str(), values.as_slice())).collect();
        check_tensors(layout, &borrowed)?;
        let view = |name: &str, range, _: &[f32]| shared_bytes(&gradients, name, range);
        let requests = blocks_by_slot(layout, &borrowed, view);
        self.push_requests(layout, requests).await
    }

    pub(super) async fn push_requests(
        &self,
        layout: &JobLayout,
        requests: BTreeMap<u32, Vec<Vec<pb::Block>>>,
    ) -> Result<(), PServerClientError> {
        let mut tasks = JoinSet::new();
        let basis = self.inner.basis.get();
        for (slot, batches) in requests {
            let permits = slot_permits();
            for blocks in batches {
                let (client, layout, permits) = (self.clone(), layout.clone(), permits.clone());
                tasks.spawn(async move {
                    let _permit = permits.acquire_owned().await.expect("never closed");
                    client.push_batch(slot, &layout, blocks, basis).await
                });
            }
        }
        join_all(tasks).await.map(drop)
    }

    /// The whole model, each block a consistent copy.
    pub async fn pull(
        &self,
        layout: &JobLayout,
    ) -> Result<BTreeMap<String, Vec<f32>>, PServerClientError> {
        let mut tensors = empty_tensors(layout);
        self.pull_into(layout, &mut tensors).await?;
        Ok(tensors)
    }

    /// Pulls the whole model into `tensors` (one flat buffer per parameter, as `pull` returns
    /// them): a trainer pulling every few batches reuses its buffers.
    pub async fn pull_into(
        &self,
        layout: &JobLayout,
        tensors: &mut BTreeMap<String, Vec<f32>>,
    ) -> Result<(), PServerClientError> {
        size_tensors(layout, tensors);
        let mut tasks = JoinSet::new();
        for (slot, batches) in ids_by_slot(layout) {
            let permits = slot_permits();
            for ids in batches {
                let (client, layout, permits) = (self.clone(), layout.clone(), permits.clone());
                tasks.spawn(async move {
                    let _permit = permits.acquire_owned().await.expect("never closed");
                    client.pull_batch(slot, &layout, ids).await
                });
            }
        }
        let mut pulled: BTreeMap<u32, Vec<Vec<CachedBlock>>> = BTreeMap::new();
        let mut restores = Vec::new();
        for (slot, blocks, model_restore) in join_all(tasks).await? {
            for (id, values) in &blocks {
                place(layout, tensors, id, values)
                    .map_err(|message| PServerClientError::Refused { slot, message })?;
            }
            pulled.entry(slot).or_default().push(blocks);
            restores.push(model_restore);
        }
        *self.cache() = Cache::Blocks(pulled);
        self.inner.basis.pulled(restores);
        Ok(())
    }

    /// Each held slot's `Status`, or why it did not answer.
    pub async fn statuses(&self) -> Vec<(u32, Result<pb::StatusReply, Status>)> {
        let table = self.inner.routes.table();
        let mut answers = Vec::new();
        for entry in &table.pservers {
            let answer = match self.inner.routes.route(entry.slot) {
                Some(mut route) => self.timed(route.client.status(pb::StatusRequest {})).await,
                None => Err(Status::unavailable("not reachable")),
            };
            answers.push((entry.slot, answer));
        }
        answers
    }

    /// One request to `slot`'s current holder, retried while the slot is being replaced (for
    /// at most `replace_wait`, if set). `idempotent` requests are also retried after an answer
    /// that never came. When requests keep failing the table is re-read through the leader.
    pub(super) async fn on_slot<T, F, Fut>(
        &self,
        slot: u32,
        idempotent: bool,
        mut attempt: F,
    ) -> Result<T, Failure>
    where
        F: FnMut(Route) -> Fut,
        Fut: Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let started = Instant::now();
        let mut last_error = "the slot is not held".to_string();
        let mut waiting = None;
        let mut next_warning = started + Duration::from_millis(WAITING_WARNING_MS);
        for failures in 1u32.. {
            if let Some(route) = self.inner.routes.route(slot) {
                match self
                    .timed(attempt(route))
                    .await
                    .map_err(|status| classify(slot, idempotent, &status))
                {
                    Ok(value) => return Ok(value),
                    Err(Failure::Retry(message)) => last_error = message,
                    Err(failure) => return Err(failure),
                }
            }
            waiting.get_or_insert_with(|| Waiting::new(&self.inner.waiting));
            if let Some(waited) = self.inner.options.replace_wait {
                if started.elapsed() >= waited {
                    return Err(Failure::Fatal(PServerClientError::Unavailable {
                        slot,
                        waited,
                        last_error,
                    }));
                }
            }
            if Instant::now() >= next_warning {
                // Without a limit a trainer waits for ever: say so, or it looks hung.
                let waited_s = started.elapsed().as_secs();
                tracing::warn!(slot, waited_s, %last_error, "waiting for pserver slot {slot} to be served (no holder, or it does not answer); --pserver-wait-s sets a limit");
                next_warning += Duration::from_millis(WAITING_WARNING_MS);
            }
            let failing = started.elapsed() >= Duration::from_millis(FAILING_BEFORE_REREAD_MS);
            if failures >= FAILURES_BEFORE_REREAD_COUNT || failing {
                self.inner.routes.reread(slot).await;
            }
            self.inner.routes.changed(Duration::from_millis(RETRY_MS)).await;
        }
        unreachable!("the failure counter cannot run out while the slot is retried")
    }

    async fn timed<T>(
        &self,
        call: impl Future<Output = Result<tonic::Response<T>, Status>>,
    ) -> Result<T, Status> {
        match tokio::time::timeout(self.inner.options.rpc_timeout, call).await {
            Ok(answer) => answer.map(tonic::Response::into_inner),
            Err(_) => Err(Status::deadline_exceeded("no answer within the request deadline")),
        }
    }

    pub(super) fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.inner.cache.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The requests of one call that may be in flight to one slot at a time.
pub(super) fn slot_permits() -> Arc<Semaphore> {
    Arc::new(Semaphore::new(REQUESTS_IN_FLIGHT_PER_SLOT_MAX))
}

/// A block's values encoded (a copy).
fn encoded(_name: &str, _range: std::ops::Range<usize>, values: &[f32]) -> Bytes {
    Bytes::from(f32_bytes::encode(values))
}

/// Blocks of a request as the cache keeps them (the payloads shared, not copied).
fn cached(blocks: Vec<pb::Block>) -> Vec<CachedBlock> {
    blocks
        .into_iter()
        .map(|block| (BlockId { name: block.name, index: block.index }, block.values.into()))
        .collect()
}

/// The fence of a request that pushes nothing.
pub(super) fn fence(route: &Route) -> pb::Fence {
    pb::Fence { slot: route.slot, generation: route.generation, model_restore: None }
}

/// The fence of a push computed on values of model restore `basis`.
pub(super) fn push_fence(route: &Route, basis: Option<u64>) -> pb::Fence {
    pb::Fence { model_restore: basis, ..fence(route) }
}

/// Every tensor must be a parameter of the layout with its element count.
pub(super) fn check_tensors(
    layout: &JobLayout,
    tensors: &[(&str, &[f32])],
) -> Result<(), PServerClientError> {
    for (name, values) in tensors {
        let Some(param) = layout.param(name) else {
            let message = format!("{name} is not a parameter of the layout");
            return Err(PServerClientError::NotInLayout { message });
        };
        if param.elements() != values.len() as u64 {
            let message = format!(
                "{name} has {} values, its shape {:?} holds {}",
                values.len(),
                param.shape,
                param.elements()
            );
            return Err(PServerClientError::NotInLayout { message });
        }
    }
    Ok(())
}

/// Every task's result; the first error wins (the rest are still awaited).
pub(super) async fn join_all<T: 'static>(
    mut tasks: JoinSet<Result<T, PServerClientError>>,
) -> Result<Vec<T>, PServerClientError> {
    let mut results = Vec::new();
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        match joined.expect("pserver client tasks do not panic") {
            Ok(value) => results.push(value),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    first_error.map_or(Ok(results), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A push the server had no room for (its byte budget) is retried, not reported as
    /// refused: the server refused it before any service saw it.
    #[test]
    fn no_room_under_the_byte_budget_is_retried() {
        let status = Status::resource_exhausted("no room for this message; try again");
        assert!(matches!(classify(0, false, &status), Failure::Retry(_)));
        let status = Status::invalid_argument("a bad block");
        assert!(matches!(classify(0, false, &status), Failure::Fatal(_)));
    }

    /// An HTTP/2 error this side's transport met (a connection broke off mid-stream) is a call
    /// cut off: a pull is tried again, a push's outcome is unknown; the server's own INTERNAL
    /// answer stays a refusal.
    #[test]
    fn a_broken_connection_is_retried_when_idempotent() {
        let mut broken = Status::internal("h2 protocol error: http2 error");
        broken.set_source(std::sync::Arc::new(std::io::Error::other("http2 error")));
        assert!(matches!(classify(0, true, &broken), Failure::Retry(_)));
        let unknown = classify(0, false, &broken);
        assert!(matches!(unknown, Failure::Fatal(PServerClientError::OutcomeUnknown { .. })));
        let answered = Status::internal("the shard panicked");
        assert!(matches!(classify(0, true, &answered), Failure::Fatal(_)));
    }
}
