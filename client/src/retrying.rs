//! `Retrying`: the retry state of one logical `MasterClient` call: since when it has tried,
//! what failed last, whether its deadline (if it has one) has passed, when it last said in the
//! log that it is still waiting, and whether it counts as waiting for a leader now.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::error::ClientError;
use super::options::WAITING_LOG_INTERVAL_MS;
use super::waiting_log::PROCESS_WAITING;

pub(crate) struct Retrying<'a> {
    call: &'static str,
    started: Instant,
    deadline: Option<Duration>,
    pub(crate) attempts: u32,
    pub(crate) last_error: String,
    warned_at: Instant,
    /// The client's count of calls waiting for a leader; this call is in it from its first
    /// failure to its end.
    waiting: &'a AtomicUsize,
    counted: bool,
}

impl<'a> Retrying<'a> {
    /// How long the call has been trying.
    pub(crate) fn waited(&self) -> Duration {
        self.started.elapsed()
    }

    pub(crate) fn new(
        call: &'static str,
        deadline: Option<Duration>,
        waiting: &'a AtomicUsize,
    ) -> Self {
        let now = Instant::now();
        Self {
            call,
            started: now,
            deadline,
            attempts: 0,
            last_error: String::from("none yet"),
            warned_at: now,
            waiting,
            counted: false,
        }
    }

    /// Starts the next attempt, or fails the call if its deadline has passed.
    pub(crate) fn next_attempt(&mut self) -> Result<u32, ClientError> {
        if let Some(deadline) = self.deadline {
            if self.attempts > 0 && self.started.elapsed() >= deadline {
                return Err(ClientError::Deadline {
                    call: self.call,
                    deadline,
                    attempts: self.attempts,
                    last_error: self.last_error.clone(),
                });
            }
        }
        self.attempts += 1;
        Ok(self.attempts)
    }

    /// Whether a pause of `pause` ends before the call's deadline (always, without one).
    pub(crate) fn has_time_for(&self, pause: Duration) -> bool {
        self.deadline.is_none_or(|deadline| self.started.elapsed() + pause < deadline)
    }

    /// An attempt failed for want of a reachable leader: the call now counts as waiting, and
    /// says so in the log every `WAITING_LOG_INTERVAL_MS`, unless another call of the process
    /// did in that interval (`WaitingLog`: one line says it for all of them).
    pub(crate) fn failed(&mut self, error: String) {
        self.last_error = error;
        if !self.counted {
            self.counted = true;
            self.waiting.fetch_add(1, Ordering::Relaxed);
            PROCESS_WAITING.enter();
        }
        if self.warned_at.elapsed() < Duration::from_millis(WAITING_LOG_INTERVAL_MS) {
            return;
        }
        self.warned_at = Instant::now();
        if PROCESS_WAITING.claim_warning(WAITING_LOG_INTERVAL_MS) {
            tracing::warn!(
                call = self.call,
                attempts = self.attempts,
                last_error = %self.last_error,
                calls_waiting = PROCESS_WAITING.waiting(),
                "no master leader answered for {} s; still trying",
                self.started.elapsed().as_secs()
            );
        }
    }
}

impl Drop for Retrying<'_> {
    fn drop(&mut self) {
        if self.counted {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            PROCESS_WAITING.leave();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails after `elapsed` of retrying under `deadline`, or keeps going.
    async fn fails_after(deadline: Option<Duration>, elapsed: Duration) -> bool {
        let waiting = AtomicUsize::new(0);
        let mut retrying = Retrying::new("Test", deadline, &waiting);
        retrying.next_attempt().expect("the first attempt always runs");
        retrying.failed("no leader".to_string());
        assert_eq!(waiting.load(Ordering::Relaxed), 1, "a failed call counts as waiting");
        tokio::time::sleep(elapsed).await;
        let failed = retrying.next_attempt().is_err();
        drop(retrying);
        assert_eq!(waiting.load(Ordering::Relaxed), 0, "an ended call no longer waits");
        failed
    }

    /// A call without a deadline keeps retrying through an hour-long outage; one with a
    /// deadline fails only once it has passed.
    #[tokio::test(start_paused = true)]
    async fn a_deadline_ends_a_call_and_none_never_does() {
        let thirty_seconds = Some(Duration::from_secs(30));
        assert!(!fails_after(None, Duration::from_secs(3_600)).await);
        assert!(!fails_after(thirty_seconds, Duration::from_secs(29)).await);
        assert!(fails_after(thirty_seconds, Duration::from_secs(30)).await);
    }
}
