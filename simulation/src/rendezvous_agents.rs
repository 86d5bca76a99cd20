//! Simulated torchrun agents on one rendezvous run (with `--rendezvous`), each on the
//! production `MasterClient` as torchrun's backend uses it (`rendezvous_write`: stamped, retried
//! with the same stamp across leader changes and lost answers; `rendezvous_read`:
//! linearizable). Through the fault phase each agent sets its own key, adds to a counter the
//! agents share, and reads the shared state key's version and writes it by that version
//! (`CompareVersion`, torch's fencing token) after a pause in which the others race it; now
//! and then it names an older version instead (the one just before, or one it read earlier),
//! as an agent whose read went stale does. Every write is recorded as asked and then as
//! answered (or of unknown outcome) for the rendezvous-keys checker
//! (`checker/rendezvous_keys.rs`). The agents stop asking when the fault phase ends, so the
//! liveness phase is the jobs' as in every other run.

use std::time::Duration;

use client::{MasterClient, RendezvousWrite};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::ClientContext;
use crate::config::SimulationConfig;
use crate::history::RendezvousEvent;
use crate::rng::SimRng;

/// The run the agents rendezvous in.
pub const RUN: &str = "sim-rdzv";
/// The key they race to write by version (torch's rendezvous state).
pub const STATE_KEY: &str = "rdzv/state";
/// The key they only add to (c10d's `add`), by positive deltas.
pub const COUNTER_KEY: &str = "rdzv/counter";
/// Ids of the agents in the history start here.
pub const AGENT_ID_BASE: u64 = 5_000;
const AGENT_COUNT: u64 = 3;
/// The agents' random streams (far from every other component's).
const AGENT_STREAM: u64 = 1 << 43;
/// The most writes one agent asks for in a run.
const WRITES_MAX: u64 = 80;
/// Between one agent's writes.
const PAUSE_MS: (u64, u64) = (20, 250);
/// Between reading the state key's version and writing by it.
const RACE_MS: (u64, u64) = (0, 80);
/// How often an agent names a version older than the one it just read.
const STALE_PERCENT: u64 = 30;
/// Versions of the state key an agent remembers having read.
const READ_KEPT: usize = 8;
/// One add's delta: positive, so the counter only grows.
const ADD_DELTA: (u64, u64) = (1, 6);

/// One simulated agent.
pub struct SimRendezvousAgent {
    agent: u64,
    client: MasterClient,
    context: ClientContext,
    rng: SimRng,
    /// When it stops asking (the fault phase's end).
    until: Instant,
    /// The versions of the state key it read, the last [`READ_KEPT`].
    read: Vec<u64>,
    writes: u64,
}

/// Starts `config`'s agents (none unless `config.rendezvous`).
pub fn spawn_all(
    config: &SimulationConfig,
    context: &ClientContext,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    if !config.rendezvous {
        return Ok(Vec::new());
    }
    let until = Instant::now() + Duration::from_millis(config.fault_phase_ms);
    let mut agents = Vec::new();
    for index in 0..AGENT_COUNT {
        let agent = AGENT_ID_BASE + index;
        let client = context.master_client(config, config.seed ^ (0x7d2_0000 + index))?;
        let rng = SimRng::derive(config.seed, AGENT_STREAM + index);
        let context = context.clone();
        let agent =
            SimRendezvousAgent { agent, client, context, rng, until, read: Vec::new(), writes: 0 };
        agents.push(tokio::spawn(agent.run()));
    }
    Ok(agents)
}

impl SimRendezvousAgent {
    /// Writes until the fault phase ends or it asked for [`WRITES_MAX`] writes.
    async fn run(mut self) {
        while self.writes < WRITES_MAX && Instant::now() < self.until {
            match self.rng.range(0, 10) {
                0..=4 => self.write_by_version().await,
                5..=7 => {
                    let delta = self.rng.range(ADD_DELTA.0, ADD_DELTA.1) as i64;
                    self.write(COUNTER_KEY, RendezvousWrite::Add(delta)).await;
                }
                _ => {
                    let (key, value) = (format!("rdzv/agent/{}", self.agent), self.value());
                    self.write(&key, RendezvousWrite::Set(value)).await;
                }
            }
            self.pause(PAUSE_MS).await;
        }
    }

    /// Reads the state key's version and writes it by that version, or by an older one.
    async fn write_by_version(&mut self) {
        let keys = [STATE_KEY.to_string()];
        let version = match self.client.rendezvous_read(RUN, &keys, Duration::ZERO).await {
            Ok((entries, _)) => entries.first().and_then(Option::as_ref).map_or(0, |e| e.version),
            Err(error) => {
                self.record(format!("read of {STATE_KEY} failed: {error}"));
                return;
            }
        };
        let named = if self.rng.percent(STALE_PERCENT) { self.stale(version) } else { version };
        if named != version {
            self.context.trace.tally("rendezvous compare by a stale version");
        }
        if self.read.len() >= READ_KEPT {
            self.read.remove(0);
        }
        self.read.push(version);
        self.pause(RACE_MS).await;
        let value = self.value();
        self.write(STATE_KEY, RendezvousWrite::CompareVersion { version: named, value }).await;
    }

    /// A version older than `version`: the one just before, or one read earlier.
    fn stale(&mut self, version: u64) -> u64 {
        let earlier: Vec<u64> = self.read.iter().copied().filter(|read| *read < version).collect();
        if earlier.is_empty() || self.rng.percent(50) {
            return version.saturating_sub(1);
        }
        earlier[self.rng.index(earlier.len())]
    }

    /// Asks for `write` on `key`, recording it as asked and then as answered.
    async fn write(&mut self, key: &str, write: RendezvousWrite) {
        self.writes += 1;
        let event = |answer| RendezvousEvent {
            agent: self.agent,
            run: RUN.to_string(),
            key: key.to_string(),
            write: write.clone(),
            answer,
        };
        self.context.history.rendezvous_event(event(None));
        let answer = self.client.rendezvous_write(RUN, key, write.clone()).await;
        let summary = match &answer {
            Ok(written) => format!(
                "set {} version {:?} count {}",
                written.set,
                written.entry.as_ref().map(|entry| entry.version),
                written.count
            ),
            Err(error) => {
                self.context.trace.tally("rendezvous write of unknown outcome");
                format!("outcome unknown: {error}")
            }
        };
        self.record(format!("{key} {} -> {summary}", describe(&write)));
        self.context.history.rendezvous_event(event(Some(answer.ok())));
    }

    /// A value no other write of the run stores.
    fn value(&self) -> Vec<u8> {
        format!("agent {} write {}", self.agent, self.writes).into_bytes()
    }

    fn record(&self, line: String) {
        self.context.trace.record(format!("rendezvous agent {}: {line}", self.agent));
    }

    async fn pause(&mut self, (low, high): (u64, u64)) {
        let ms = self.rng.range(low, high);
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// A write, without its value.
fn describe(write: &RendezvousWrite) -> String {
    match write {
        RendezvousWrite::Set(_) => "set".to_string(),
        RendezvousWrite::CompareSet { .. } => "compare-set".to_string(),
        RendezvousWrite::CompareVersion { version, .. } => format!("compare version {version}"),
        RendezvousWrite::Add(delta) => format!("add {delta}"),
        RendezvousWrite::Delete => "delete".to_string(),
    }
}
