//! The event trace of one run: every message, fault, client operation and applied entry, as
//! lines of our own canonical text, hashed with FNV-1a. Two runs of one seed must hash alike.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;

/// How many of the latest lines are kept to print when a run fails (unless told otherwise).
pub const TAIL_LINES_DEFAULT: usize = 200;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A shared, append-only trace. Cheap to clone: clones write to one trace.
#[derive(Clone)]
pub struct Trace {
    inner: Arc<Mutex<TraceState>>,
}

struct TraceState {
    start: Instant,
    tail_lines_max: usize,
    hash: u64,
    event_count: u64,
    tail: VecDeque<String>,
    /// How often each kind of fault or rare event happened (coverage, not hashed).
    tallies: BTreeMap<&'static str, u64>,
}

impl Trace {
    /// An empty trace whose clock starts now (simulated time), keeping the last
    /// `tail_lines_max` lines.
    pub fn new(tail_lines_max: usize) -> Self {
        let state = TraceState {
            start: Instant::now(),
            tail_lines_max,
            hash: FNV_OFFSET_BASIS,
            event_count: 0,
            tail: VecDeque::new(),
            tallies: BTreeMap::new(),
        };
        Self { inner: Arc::new(Mutex::new(state)) }
    }

    fn state(&self) -> MutexGuard<'_, TraceState> {
        // The simulation is single-threaded; a poisoned lock only means a task panicked, and
        // the trace is still the best record of what happened.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts one event of `kind`.
    pub fn tally(&self, kind: &'static str) {
        *self.state().tallies.entry(kind).or_default() += 1;
    }

    /// How often each kind happened.
    pub fn tallies(&self) -> BTreeMap<&'static str, u64> {
        self.state().tallies.clone()
    }

    /// Simulated milliseconds since the trace started.
    pub fn now_ms(&self) -> u64 {
        let elapsed = self.state().start.elapsed().as_millis();
        u64::try_from(elapsed).unwrap_or(u64::MAX)
    }

    /// Simulated milliseconds from the trace's start to `instant` (0 if before it).
    pub fn ms_at(&self, instant: Instant) -> u64 {
        let elapsed = instant.saturating_duration_since(self.state().start).as_millis();
        u64::try_from(elapsed).unwrap_or(u64::MAX)
    }

    /// Appends one event, stamped with the simulated time.
    pub fn record(&self, event: impl AsRef<str>) {
        let now_ms = self.now_ms();
        let line = format!("{now_ms:>7} {}", event.as_ref());
        let mut state = self.state();
        for byte in line.as_bytes().iter().chain(b"\n") {
            state.hash = (state.hash ^ u64::from(*byte)).wrapping_mul(FNV_PRIME);
        }
        state.event_count += 1;
        if state.tail.len() >= state.tail_lines_max {
            state.tail.pop_front();
        }
        state.tail.push_back(line);
    }

    /// The hash of every event so far.
    pub fn hash(&self) -> u64 {
        self.state().hash
    }

    /// How many events were recorded.
    pub fn event_count(&self) -> u64 {
        self.state().event_count
    }

    /// The latest events, oldest first.
    pub fn tail(&self) -> Vec<String> {
        self.state().tail.iter().cloned().collect()
    }
}

impl Default for Trace {
    fn default() -> Self {
        Self::new(TAIL_LINES_DEFAULT)
    }
}

/// FNV-1a of `bytes`, for hashing entries and commands the same way everywhere.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(FNV_OFFSET_BASIS, |hash, byte| (hash ^ u64::from(*byte)).wrapping_mul(FNV_PRIME))
}
