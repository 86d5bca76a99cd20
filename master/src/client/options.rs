//! How long `MasterClient` waits and how hard it retries: every limit is a named default.

use std::time::Duration;

/// The deadline of one RPC attempt.
pub const RPC_TIMEOUT_MS_DEFAULT: u64 = 2_000;
/// How long one logical call keeps retrying across leader changes before it gives up.
pub const CALL_DEADLINE_MS_DEFAULT: u64 = 30_000;
/// The first pause after a failed attempt; doubled after every further failure.
pub const BACKOFF_MS_MIN: u64 = 10;
/// The longest pause between attempts. Short, because during an election every pause past the
/// moment a new leader is elected is failover time a trainer sees; an attempt is a handful of
/// small RPCs, cheap enough to repeat ten times a second.
pub const BACKOFF_MS_MAX: u64 = 100;
/// How long connecting to one master may take.
pub const CONNECT_TIMEOUT_MS: u64 = 500;
/// The largest reply accepted (status replies with many failed tasks can be large).
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;

#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub rpc_timeout: Duration,
    pub call_deadline: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            rpc_timeout: Duration::from_millis(RPC_TIMEOUT_MS_DEFAULT),
            call_deadline: Duration::from_millis(CALL_DEADLINE_MS_DEFAULT),
        }
    }
}

/// Exponential backoff between `BACKOFF_MS_MIN` and `BACKOFF_MS_MAX`.
pub(crate) fn backoff(attempt: u32) -> Duration {
    let factor = 1u64 << attempt.min(16);
    Duration::from_millis(BACKOFF_MS_MIN.saturating_mul(factor).min(BACKOFF_MS_MAX))
}

#[cfg(test)]
mod tests {
    /// Backoff doubles from the minimum and stops at the maximum.
    #[test]
    fn backoff_doubles_then_caps() {
        let millis: Vec<u64> =
            (0..8).map(|attempt| super::backoff(attempt).as_millis() as u64).collect();
        assert_eq!(millis, [10, 20, 40, 80, 100, 100, 100, 100]);
    }
}
