//! How long `MasterClient` waits and how hard it retries: every limit is a named default.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use platform::security::{RpcChannel, Security};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

/// The deadline of one RPC attempt.
pub const RPC_TIMEOUT_MS_DEFAULT: u64 = 2_000;
/// How long one logical call keeps retrying across leader changes before it gives up (tools
/// and tests; a trainer waits without a deadline, see `ClientOptions::call_deadline`).
pub const CALL_DEADLINE_MS_DEFAULT: u64 = 30_000;
/// While a call finds no leader, it says so in the log this often (and not more).
pub const WAITING_LOG_INTERVAL_MS: u64 = 10_000;
/// The first pause after a failed attempt; doubled after every further failure.
pub const BACKOFF_MS_MIN: u64 = 10;
/// The longest pause between attempts. Short, because during an election every pause past the
/// moment a new leader is elected is failover time a trainer sees (at 100 ms, 40-100 ms of a
/// 300-400 ms failover); an attempt is a handful of small RPCs, cheap enough to repeat twenty
/// times a second.
pub const BACKOFF_MS_MAX: u64 = 50;
/// A call that has found no leader for `OUTAGE_MS` is in an outage, not an election: its
/// pauses grow to at most `BACKOFF_MS_OUTAGE`, so that every client of a group whose masters
/// are all down (each attempt dials every master) does not keep twenty attempts a second
/// going, and a group coming back is not met by all of them at once. A leader elected then is
/// found within that pause.
pub const OUTAGE_MS: u64 = 10_000;
pub const BACKOFF_MS_OUTAGE: u64 = 500;
/// The shortest and longest pause after a `try-again-later` refusal (the strangers' session
/// pool is full): the master says when a place frees up, and the client asks again then,
/// but at least this seldom (each ask is a log entry) and at most this late (another client
/// may leave earlier than the master could promise).
pub const TRY_AGAIN_WAIT_MS_MIN: u64 = 1_000;
pub const TRY_AGAIN_WAIT_MS_MAX: u64 = 10_000;
/// How long connecting to one master may take.
pub const CONNECT_TIMEOUT_MS: u64 = 500;
/// The largest reply accepted (status replies with many failed tasks can be large).
pub const MESSAGE_BYTES_MAX: usize = 64 << 20;

#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub rpc_timeout: Duration,
    /// How long one logical call retries before it fails with `ClientError::Deadline`;
    /// `None`: until a leader answers, however long the masters are out (a trainer waits out
    /// an outage of any length; a write keeps its one stamp throughout, so it applies once).
    pub call_deadline: Option<Duration>,
    /// TLS and token of every connection to a master.
    pub security: Security,
    /// How a master's address becomes a channel: `None` dials it over TCP; the simulation
    /// routes it through its network in process.
    pub dialer: Option<Dialer>,
    /// Draws the client id and the backoff jitter from this seed instead of the OS (the
    /// simulation replays a seed exactly).
    pub seed: Option<u64>,
    /// The job every job-scoped call names (a trainer's, a pserver's); empty: the group's
    /// only job.
    pub job: String,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            rpc_timeout: Duration::from_millis(RPC_TIMEOUT_MS_DEFAULT),
            call_deadline: Some(Duration::from_millis(CALL_DEADLINE_MS_DEFAULT)),
            security: Security::default(),
            dialer: None,
            seed: None,
            job: String::new(),
        }
    }
}

/// Turns a master's address into a channel without a socket.
#[derive(Clone)]
pub struct Dialer(pub Arc<dyn Fn(&str) -> RpcChannel + Send + Sync>);

impl std::fmt::Debug for Dialer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("Dialer")
    }
}

/// The client's random draws: seeded, or from the OS.
pub(crate) struct Jitter {
    rng: Mutex<StdRng>,
}

impl Jitter {
    pub(crate) fn new(seed: Option<u64>) -> Self {
        let rng = seed.map_or_else(StdRng::from_entropy, StdRng::seed_from_u64);
        Self { rng: Mutex::new(rng) }
    }

    /// A random non-zero client id.
    pub(crate) fn client_id(&self) -> u64 {
        self.draw(|rng| rng.gen::<u64>().max(1))
    }

    /// Exponential backoff between `BACKOFF_MS_MIN` and `BACKOFF_MS_MAX` (`BACKOFF_MS_OUTAGE`
    /// once the call has `waited` `OUTAGE_MS`), with "equal jitter": half the step fixed, half
    /// random, so clients that failed together (every trainer at a leader's death) do not
    /// retry in lockstep.
    pub(crate) fn backoff(&self, attempt: u32, waited: Duration) -> Duration {
        let cap_ms = if waited >= Duration::from_millis(OUTAGE_MS) {
            BACKOFF_MS_OUTAGE
        } else {
            BACKOFF_MS_MAX
        };
        let step_ms = backoff_step_ms(attempt, cap_ms);
        let half_ms = step_ms / 2;
        let pause_ms = half_ms + self.draw(|rng| rng.gen_range(0..=step_ms - half_ms));
        assert!(pause_ms <= cap_ms, "a backoff of {pause_ms} ms passes the cap");
        Duration::from_millis(pause_ms)
    }

    fn draw<T>(&self, draw: impl FnOnce(&mut StdRng) -> T) -> T {
        draw(&mut self.rng.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
    }
}

/// The exponential step, capped at `cap_ms`, the jitter is drawn within.
fn backoff_step_ms(attempt: u32, cap_ms: u64) -> u64 {
    let factor = 1u64 << attempt.min(16);
    BACKOFF_MS_MIN.saturating_mul(factor).min(cap_ms)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    /// The step doubles from the minimum and stops at the maximum; each pause lies within
    /// [step / 2, step] and pauses are not all alike; a call waiting an outage's length pauses
    /// up to the outage cap instead.
    #[test]
    fn backoff_doubles_caps_and_jitters() {
        let steps: Vec<u64> =
            (0..8).map(|attempt| super::backoff_step_ms(attempt, super::BACKOFF_MS_MAX)).collect();
        assert_eq!(steps, [10, 20, 40, 50, 50, 50, 50, 50]);
        let jitter = super::Jitter::new(None);
        let pause_ms = |waited_ms| jitter.backoff(6, Duration::from_millis(waited_ms)).as_millis();
        let pauses: Vec<u128> = (0..200).map(|_| pause_ms(9_999)).collect();
        assert!(pauses.iter().all(|pause| (25..=50).contains(pause)), "{pauses:?}");
        assert!(pauses.iter().any(|pause| *pause != pauses[0]), "jittered");
        let outage: Vec<u128> = (0..200).map(|_| pause_ms(super::OUTAGE_MS)).collect();
        assert!(outage.iter().all(|pause| (250..=500).contains(pause)), "{outage:?}");
        let seeded = |seed| {
            let jitter = super::Jitter::new(Some(seed));
            (0..20).map(|_| jitter.backoff(6, Duration::ZERO)).collect::<Vec<_>>()
        };
        assert_eq!(seeded(7), seeded(7), "a seed replays");
        assert_ne!(seeded(7), seeded(8));
    }
}
