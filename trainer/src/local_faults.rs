//! `LocalFaults`: this trainer's run of tasks it could not read (its own view of the data, not
//! the data), with the backoff between them and the point where it gives up.

use std::time::Duration;

/// Consecutive local failures reported without waiting; from the next one on, the trainer backs
/// off before asking for another task (a broken mount rarely heals within milliseconds, and
/// each quick failure hands a task back the healthy trainers then wait for).
pub const LOCAL_FAILURES_BEFORE_BACKOFF: u32 = 2;
/// The first backoff; each further local failure doubles it.
pub const LOCAL_BACKOFF_MS: u64 = 250;
/// The longest backoff between two tasks.
pub const LOCAL_BACKOFF_MS_MAX: u64 = 8_000;

/// Counts consecutive local failures; a task read successfully resets the count.
#[derive(Debug)]
pub struct LocalFaults {
    consecutive: u32,
    failures_max: u32,
}

/// What to do after a local failure.
#[derive(Debug, PartialEq, Eq)]
pub enum LocalVerdict {
    /// Ask for the next task at once.
    Continue,
    /// Wait this long, then ask for the next task.
    BackOff(Duration),
    /// Too many in a row: this trainer's view of the data is broken; exit with the error.
    GiveUp { consecutive: u32 },
}

impl LocalFaults {
    /// Gives up at the `failures_max`-th consecutive local failure.
    pub fn new(failures_max: u32) -> Self {
        Self { consecutive: 0, failures_max }
    }

    /// A task's data was read: the view works again.
    pub fn read_ok(&mut self) {
        self.consecutive = 0;
    }

    /// A task's data could not be read by this trainer.
    pub fn failed(&mut self) -> LocalVerdict {
        self.consecutive = self.consecutive.saturating_add(1);
        if self.consecutive >= self.failures_max {
            return LocalVerdict::GiveUp { consecutive: self.consecutive };
        }
        let Some(beyond) = self.consecutive.checked_sub(LOCAL_FAILURES_BEFORE_BACKOFF) else {
            return LocalVerdict::Continue;
        };
        if beyond == 0 {
            return LocalVerdict::Continue;
        }
        let doubling = 1_u64.checked_shl(beyond - 1).unwrap_or(u64::MAX);
        let backoff_ms = LOCAL_BACKOFF_MS.saturating_mul(doubling).min(LOCAL_BACKOFF_MS_MAX);
        LocalVerdict::BackOff(Duration::from_millis(backoff_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first failures go on at once, the next back off exponentially up to the cap, the
    /// limit gives up, and a success starts the count over.
    #[test]
    fn backs_off_then_gives_up() {
        let mut faults = LocalFaults::new(8);
        let ms = |ms| LocalVerdict::BackOff(Duration::from_millis(ms));
        let expected = [
            LocalVerdict::Continue,
            LocalVerdict::Continue,
            ms(250),
            ms(500),
            ms(1_000),
            ms(2_000),
            ms(4_000),
            LocalVerdict::GiveUp { consecutive: 8 },
        ];
        for (index, want) in expected.into_iter().enumerate() {
            assert_eq!(faults.failed(), want, "failure {}", index + 1);
        }
        faults.read_ok();
        assert_eq!(faults.failed(), LocalVerdict::Continue, "a success starts over");
        let mut long = LocalFaults::new(u32::MAX);
        let last = (0..40).map(|_| long.failed()).last();
        assert_eq!(last, Some(ms(LOCAL_BACKOFF_MS_MAX)), "capped");
    }
}
