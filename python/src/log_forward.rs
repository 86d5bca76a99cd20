//! The Rust side's log events, handed to Python's `logging` (the `raftrain` logger and its
//! children, one per Rust module: `raftrain.client.retrying`), so that a script's handlers,
//! levels and formats apply to them and nothing writes terminal colour into a file or a pipe.
//! A `tracing` layer queues each event that passes the `RAFTRAIN_LOG` filter (bounded: past
//! `QUEUE_LEN_MAX` the oldest go, counted and reported), and a Python thread
//! (`raftrain/_logging.py`) takes them with `next_log`, the GIL released while it waits. The
//! queue's lock is process-wide, so `fork_guard` holds it across a `fork` like standard error,
//! and the child starts with an empty queue: its parent forwards what was queued.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use pyo3::{pyfunction, Python};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Events waiting for the Python thread; past this the oldest are dropped.
const QUEUE_LEN_MAX: usize = 1_024;

/// One event as Python's `logging` takes it: (level number, logger name, message).
pub type LogRecord = (u8, String, String);

/// The events not yet taken, and how many were dropped since the last one was taken.
pub struct Queue {
    records: VecDeque<LogRecord>,
    dropped: u64,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue { records: VecDeque::new(), dropped: 0 });
static QUEUED: Condvar = Condvar::new();

fn queue() -> MutexGuard<'static, Queue> {
    QUEUE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Held by the forking thread across a `fork` (see `fork_guard`).
pub fn hold_queue() -> MutexGuard<'static, Queue> {
    queue()
}

/// In a forked child, with the queue held: the parent forwards what was queued.
pub fn forget_queued(held: &mut MutexGuard<'static, Queue>) {
    held.records.clear();
    held.dropped = 0;
}

/// The layer that queues every event it sees.
pub struct ForwardLayer;

impl<S: Subscriber> Layer<S> for ForwardLayer {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        let mut text = Text::default();
        event.record(&mut text);
        let metadata = event.metadata();
        let logger = format!("raftrain.{}", metadata.target().replace("::", "."));
        let record = (level_number(*metadata.level()), logger, text.finish());
        let mut queue = queue();
        if queue.records.len() >= QUEUE_LEN_MAX {
            queue.records.pop_front();
            queue.dropped += 1;
        }
        queue.records.push_back(record);
        QUEUED.notify_one();
    }
}

/// Python's `logging` level numbers.
fn level_number(level: Level) -> u8 {
    match level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// An event's message, then its other fields as `name=value`.
#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Text {
    fn finish(self) -> String {
        match self.fields.is_empty() {
            true => self.message,
            false => format!("{}{}", self.message, self.fields),
        }
    }
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message.push_str(value),
            name => {
                let _ = write!(self.fields, " {name}={value}");
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => {
                let _ = write!(self.message, "{value:?}");
            }
            name => {
                let _ = write!(self.fields, " {name}={value:?}");
            }
        }
    }
}

/// The next queued event, waiting up to `timeout_s` for one (the GIL released meanwhile);
/// `None` when none came. Records dropped from a full queue come first as one warning.
#[pyfunction]
pub fn next_log(py: Python<'_>, timeout_s: f64) -> Option<LogRecord> {
    let timeout = Duration::from_secs_f64(timeout_s.clamp(0.0, 60.0));
    py.detach(|| {
        let queue = queue();
        let (mut queue, _) = QUEUED
            .wait_timeout_while(queue, timeout, |queue| {
                queue.records.is_empty() && queue.dropped == 0
            })
            .unwrap_or_else(PoisonError::into_inner);
        if queue.dropped > 0 {
            let dropped = std::mem::take(&mut queue.dropped);
            let message = format!("{dropped} log records dropped: Python's logging fell behind");
            return Some((30, "raftrain".to_string(), message));
        }
        queue.records.pop_front()
    })
}
