//! The rendezvous workload: clients on one torchrun rendezvous run's keys, as torchrun's
//! backend and c10d store use them. Each client adds 1 to a shared counter key (`Add`,
//! stamped: exactly once across retries), races the others on a shared state key by reading
//! its version and writing a value naming itself and its sequence by that version
//! (`CompareVersion`, torch's fencing token), now and then with an older version on purpose,
//! and reads both keys (linearizable). Every call is recorded; a client whose call ends with
//! an unknown outcome (`Info`) retires and a new logical process takes its place. After the
//! heal, [`final_read`] takes the counter's last value for the checker
//! (`checker/rendezvous_keys.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use client::{ClientError, ClientOptions, MasterClient, RendezvousEntry, RendezvousWrite};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::sync::watch;

use crate::history::{History, KeyEntry, OpKind, Operation, Value, RENDEZVOUS_FINAL_PROCESS};
use crate::workload::task_queue::{error_value, kind_of};

/// The run the clients rendezvous in.
pub const RUN: &str = "jepsen-rdzv";
/// The key they only add 1 to.
pub const COUNTER_KEY: &str = "counter";
/// The key they race to write by version.
pub const STATE_KEY: &str = "state";
/// Rendezvous clients beside the task queue's.
pub const CLIENTS: usize = 3;
/// The longest a client call keeps retrying before its outcome is unknown.
const CALL_DEADLINE_MS: u64 = 4_000;
/// Between one client's operations.
const PAUSE_MS: (u64, u64) = (10, 120);
/// Between reading the state key's version and writing by it: the others race meanwhile.
const RACE_MS: (u64, u64) = (0, 60);
/// How often a write names a version older than the one just read (which must be refused).
const STALE_PERCENT: u32 = 20;
/// How long the final read keeps trying.
const FINAL_READ_MS: u64 = 10_000;

/// The shared parts of every rendezvous client.
#[derive(Clone)]
pub struct Rendezvous {
    pub masters: Vec<String>,
    pub history: Arc<History>,
    pub next_process: Arc<AtomicU64>,
    pub stop: watch::Receiver<bool>,
}

/// What a client does next.
enum Move {
    Add,
    Race,
    Read,
}

impl Rendezvous {
    /// Runs `clients` clients, each replaced by a new process when it retires, until stop.
    pub async fn run(self, clients: usize, seed: u64) {
        let mut tasks = tokio::task::JoinSet::new();
        for slot in 0..clients {
            let workload = self.clone();
            let rng = StdRng::seed_from_u64(seed ^ 0x7264_7a76_0000 ^ slot as u64);
            tasks.spawn(workload.client_slot(rng));
        }
        while tasks.join_next().await.is_some() {}
    }

    async fn client_slot(self, mut rng: StdRng) {
        while !*self.stop.borrow() {
            let process = self.next_process.fetch_add(1, Ordering::SeqCst);
            if let Err(error) = self.client_life(process, &mut rng).await {
                tracing::debug!(process, %error, "a rendezvous client retired");
            }
        }
    }

    /// One logical client's calls until one ends unknown or the run stops.
    async fn client_life(&self, process: u64, rng: &mut StdRng) -> anyhow::Result<()> {
        let client = client(&self.masters, Duration::from_millis(CALL_DEADLINE_MS))?;
        let mut seq = 0u64;
        while !*self.stop.borrow() {
            let next = match rng.gen_range(0..10) {
                0..=3 => Move::Add,
                4..=7 => Move::Race,
                _ => Move::Read,
            };
            match next {
                Move::Add => self.add(process, &client).await?,
                Move::Read => {
                    read(&self.history, process, &client).await?;
                }
                Move::Race => {
                    seq += 1;
                    self.race(process, seq, &client, rng).await?;
                }
            }
            tokio::time::sleep(Duration::from_millis(rng.gen_range(PAUSE_MS.0..=PAUSE_MS.1))).await;
        }
        Ok(())
    }

    async fn add(&self, process: u64, client: &MasterClient) -> anyhow::Result<()> {
        let (kind, _) = self
            .history
            .call(process, Operation::RendezvousAdd, async {
                match client.rendezvous_write(RUN, COUNTER_KEY, RendezvousWrite::Add(1)).await {
                    Ok(written) => {
                        let version = written.entry.map_or(0, |entry| entry.version);
                        (OpKind::Ok, Value::RdzvAdded { count: written.count, version }, ())
                    }
                    Err(error) => (kind_of(&error), error_value(&error), ()),
                }
            })
            .await;
        retire_if_unknown(kind, "add")
    }

    /// Reads the state key's version, waits while the others race, and writes by it (or, now
    /// and then, by an older version: such a write must be refused).
    async fn race(
        &self,
        process: u64,
        seq: u64,
        client: &MasterClient,
        rng: &mut StdRng,
    ) -> anyhow::Result<()> {
        let Some(read) = read(&self.history, process, client).await? else { return Ok(()) };
        tokio::time::sleep(Duration::from_millis(rng.gen_range(RACE_MS.0..=RACE_MS.1))).await;
        let stale = read.version > 0 && rng.gen_ratio(STALE_PERCENT, 100);
        // Mostly the version just before (the likeliest stale read), else any older one.
        let base = match (stale, rng.gen_ratio(2, 3)) {
            (true, true) => read.version - 1,
            (true, false) => rng.gen_range(0..read.version),
            (false, _) => read.version,
        };
        let write = format!("p{process}-s{seq}");
        let f = Operation::RendezvousCompareVersion { base, write: write.clone(), stale };
        let (kind, _) = self
            .history
            .call(process, f, async {
                let asked =
                    RendezvousWrite::CompareVersion { version: base, value: write.into_bytes() };
                match client.rendezvous_write(RUN, STATE_KEY, asked).await {
                    Ok(written) => {
                        let state = key_entry(written.entry.as_ref());
                        (OpKind::Ok, Value::RdzvWritten { set: written.set, state }, ())
                    }
                    Err(error) => (kind_of(&error), error_value(&error), ()),
                }
            })
            .await;
        retire_if_unknown(kind, "compare-version")
    }
}

/// One recorded read of both keys; the state key's entry when it answered.
async fn read(
    history: &History,
    process: u64,
    client: &MasterClient,
) -> anyhow::Result<Option<KeyEntry>> {
    let (kind, state) = history
        .call(process, Operation::RendezvousRead, async {
            match read_keys(client).await {
                Ok((counter, state)) => {
                    (OpKind::Ok, Value::RdzvKeys { counter, state: state.clone() }, Some(state))
                }
                Err(error) => (kind_of(&error), error_value(&error), None),
            }
        })
        .await;
    retire_if_unknown(kind, "read")?;
    Ok(state)
}

async fn read_keys(client: &MasterClient) -> Result<(KeyEntry, KeyEntry), ClientError> {
    let keys = [COUNTER_KEY.to_string(), STATE_KEY.to_string()];
    let (entries, _) = client.rendezvous_read(RUN, &keys, Duration::ZERO).await?;
    let entry = |index: usize| key_entry(entries.get(index).and_then(Option::as_ref));
    Ok((entry(0), entry(1)))
}

/// The counter and state keys once the clients stopped and the faults healed, retried until
/// one read answers or [`FINAL_READ_MS`] passes (each attempt recorded).
pub async fn final_read(history: &History, masters: &[String]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_millis(FINAL_READ_MS);
    let client = client(masters, Duration::from_secs(2))?;
    loop {
        match read(history, RENDEZVOUS_FINAL_PROCESS, &client).await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) | Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            _ => anyhow::bail!("no final rendezvous read within {FINAL_READ_MS} ms"),
        }
    }
}

fn client(masters: &[String], deadline: Duration) -> Result<MasterClient, ClientError> {
    let options = ClientOptions {
        call_deadline: Some(deadline),
        rpc_timeout: Duration::from_millis(500),
        ..ClientOptions::default()
    };
    MasterClient::new(masters, options)
}

fn key_entry(entry: Option<&RendezvousEntry>) -> KeyEntry {
    entry.map_or_else(KeyEntry::default, |entry| KeyEntry {
        value: String::from_utf8_lossy(&entry.value).into_owned(),
        version: entry.version,
    })
}

fn retire_if_unknown(kind: OpKind, what: &str) -> anyhow::Result<()> {
    anyhow::ensure!(kind != OpKind::Info, "the {what} ended with an unknown outcome");
    Ok(())
}
