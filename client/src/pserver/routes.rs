//! `Routes`: the pserver table, kept current by a task that follows the master's
//! `WatchPServers` stream, and one lazily connected channel per slot holder. The watch can go
//! stale (its stream on a master that was paused or cut off, until keepalive notices), so a
//! caller whose route keeps failing asks for a re-read: a linearizable `ListPServers` through
//! the leader, taken if it names a newer holder of the slot.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{ClientError, MasterClient, PServerTable};
use platform::security::{RpcChannel, Security};
use proto::pserver::p_server_service_client::PServerServiceClient;
use tokio::sync::watch;

use super::warning_pace::WarningPace;
use crate::pserver::limits::{FRAME_BYTES_MAX, MESSAGE_BYTES_MAX};

/// Pause before a watch that ended is started again, doubled after each failure in a row (a
/// job not submitted yet) up to `REWATCH_MS_MAX`.
const REWATCH_MS: u64 = 200;
const REWATCH_MS_MAX: u64 = 2_000;
/// A watch that keeps failing is warned about at once, then at most this often.
const WATCH_WARNING_MS: u64 = 10_000;
const CONNECT_TIMEOUT_MS: u64 = 1_000;
/// Re-reads of the table at most this often, whichever of a trainer's many requests asks.
const REREAD_MS_MIN: u64 = 2_000;
/// How long one re-read may wait for a leader: a caller goes back to its retries (and the
/// watch) meanwhile; the next failure asks again.
const REREAD_TIMEOUT_MS: u64 = 5_000;

/// Where one slot is served now.
#[derive(Clone, Debug)]
pub struct Route {
    pub slot: u32,
    pub generation: u64,
    /// The generated client, for the control calls (init, status).
    pub client: PServerServiceClient<RpcChannel>,
    /// The same connection, for the data plane's calls (`platform::unary::call`).
    pub channel: RpcChannel,
}

/// One connection to a holder, as both clients use it.
#[derive(Clone, Debug)]
struct Connection {
    client: PServerServiceClient<RpcChannel>,
    channel: RpcChannel,
}

/// The table and the channels to its holders.
#[derive(Debug)]
pub struct Routes {
    table: watch::Receiver<PServerTable>,
    /// Shared with the follower: a re-read updates the table too.
    sender: Arc<watch::Sender<PServerTable>>,
    master: Arc<MasterClient>,
    /// When the last re-read started (one at a time).
    reread_at: tokio::sync::Mutex<Option<Instant>>,
    channels: Mutex<HashMap<(String, u64), Connection>>,
    /// The TLS and token of every pserver connection: the master client's own.
    security: Security,
    /// Whether the masters last said the job does not exist.
    job_missing: Arc<AtomicBool>,
    follower: tokio::task::JoinHandle<()>,
}

impl Routes {
    /// Starts following the master's pserver table.
    pub fn follow(master: Arc<MasterClient>) -> Self {
        let (sender, table) = watch::channel(PServerTable::default());
        let sender = Arc::new(sender);
        let security = master.security().clone();
        let job_missing = Arc::new(AtomicBool::new(false));
        let follower =
            tokio::spawn(follow_table(master.clone(), sender.clone(), job_missing.clone()));
        Self {
            table,
            sender,
            master,
            reread_at: tokio::sync::Mutex::new(None),
            channels: Mutex::new(HashMap::new()),
            security,
            job_missing,
            follower,
        }
    }

    /// The job's name, and whether the masters last said it does not exist.
    pub fn job_missing(&self) -> Option<&str> {
        self.job_missing.load(Ordering::Relaxed).then(|| self.master.job())
    }

    /// Re-reads the table with a linearizable `ListPServers` (requests to `slot`'s holder keep
    /// failing: the watch may be following a master that no longer leads) and takes it if it
    /// holds `slot` under a newer generation than the table here (generations only grow). At
    /// most one re-read per `REREAD_MS_MIN`, however many requests ask.
    pub async fn reread(&self, slot: u32) {
        // One re-read at a time: a caller that finds one under way goes back to its retries.
        let Ok(mut reread_at) = self.reread_at.try_lock() else { return };
        if reread_at.is_some_and(|at| at.elapsed() < Duration::from_millis(REREAD_MS_MIN)) {
            return;
        }
        *reread_at = Some(Instant::now());
        let timeout = Duration::from_millis(REREAD_TIMEOUT_MS);
        let listed = match tokio::time::timeout(timeout, self.master.list_pservers()).await {
            Ok(Ok(listed)) => listed,
            Ok(Err(error)) => return tracing::debug!(slot, %error, "re-reading the table failed"),
            Err(_) => return tracing::debug!(slot, "no leader answered the re-read in time"),
        };
        let generation = |table: &PServerTable| {
            table.pservers.iter().find(|entry| entry.slot == slot).map(|entry| entry.generation)
        };
        let taken = self.sender.send_if_modified(|table| {
            let newer = generation(&listed) > generation(table);
            if newer {
                *table = listed.clone();
            }
            newer
        });
        if taken {
            tracing::info!(slot, generation = ?generation(&listed), "re-read the pserver table: the slot has a new holder");
        }
    }

    /// The table as last seen.
    pub fn table(&self) -> PServerTable {
        self.table.borrow().clone()
    }

    /// Waits until the table changes or `timeout` passes.
    pub async fn changed(&self, timeout: Duration) {
        let mut table = self.table.clone();
        let _ = tokio::time::timeout(timeout, table.changed()).await;
    }

    /// The current holder of `slot`, if the slot is held.
    pub fn route(&self, slot: u32) -> Option<Route> {
        let table = self.table.borrow();
        let entry = table.pservers.iter().find(|entry| entry.slot == slot)?;
        let key = (entry.addr.clone(), entry.generation);
        let mut channels = self.channels.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Only current holders stay: a replaced pserver's channel goes with it.
        if !channels.contains_key(&key) {
            channels.retain(|(_, generation), _| {
                table.pservers.iter().any(|held| held.generation == *generation)
            });
            channels.insert(key.clone(), connect(&self.security, &entry.addr)?);
        }
        let Connection { client, channel } = channels[&key].clone();
        Some(Route { slot, generation: entry.generation, client, channel })
    }
}

impl Drop for Routes {
    fn drop(&mut self) {
        self.follower.abort();
    }
}

/// Keeps `sender` at the master's latest table, restarting the watch whenever it ends (backing
/// off while it fails), and `job_missing` at whether the masters know the job.
async fn follow_table(
    master: Arc<MasterClient>,
    sender: Arc<watch::Sender<PServerTable>>,
    job_missing: Arc<AtomicBool>,
) {
    let mut pace = WarningPace::new(Duration::from_millis(WATCH_WARNING_MS));
    let mut rewatch_ms = REWATCH_MS;
    loop {
        let mut stream = master.watch_pservers();
        while let Some(next) = stream.next().await {
            match next {
                Ok(table) => {
                    job_missing.store(false, Ordering::Relaxed);
                    pace.reset();
                    rewatch_ms = REWATCH_MS;
                    sender.send_replace(table);
                }
                Err(error) => {
                    let missing = matches!(error, ClientError::NoSuchJob { .. });
                    job_missing.store(missing, Ordering::Relaxed);
                    rewatch_ms = (rewatch_ms * 2).min(REWATCH_MS_MAX);
                    warn_watch_failed(&mut pace, master.job(), &error, missing);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(rewatch_ms)).await;
    }
}

/// Warns that the table watch failed, at `pace`.
fn warn_watch_failed(pace: &mut WarningPace, job: &str, error: &ClientError, missing: bool) {
    let Some(held_back) = pace.due(Instant::now()) else { return };
    let quiet_ms = WATCH_WARNING_MS;
    if missing {
        tracing::warn!(
            job,
            held_back,
            quiet_ms,
            "job `{job}` does not exist: the masters know no job by that name (submit it, or \
             check --job); waiting for it"
        );
        return;
    }
    tracing::warn!(%error, held_back, quiet_ms, "pserver table watch failed; starting it again");
}

/// A lazily connected client with the windows and message limits of multi-MB payloads.
fn connect(security: &Security, addr: &str) -> Option<Connection> {
    let endpoint = match security.endpoint(addr) {
        Ok(endpoint) => endpoint,
        Err(error) => {
            tracing::warn!(%addr, %error, "the master lists a pserver address that is not valid");
            return None;
        }
    };
    let endpoint = endpoint
        .connect_timeout(Duration::from_millis(CONNECT_TIMEOUT_MS))
        .tcp_nodelay(true)
        .initial_stream_window_size(16 << 20)
        .initial_connection_window_size(64 << 20)
        .max_frame_size(FRAME_BYTES_MAX);
    let channel = security.channel(&endpoint);
    let client = PServerServiceClient::new(channel.clone())
        .max_decoding_message_size(MESSAGE_BYTES_MAX)
        .max_encoding_message_size(MESSAGE_BYTES_MAX);
    Some(Connection { client, channel })
}
