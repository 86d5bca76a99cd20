//! `Routes`: the pserver table, kept current by a task that follows the master's
//! `WatchPServers` stream, and one lazily connected channel per slot holder.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use consensus::security::{RpcChannel, Security};
use master::client::{MasterClient, PServerTable};
use proto::pserver::p_server_service_client::PServerServiceClient;
use tokio::sync::watch;

use crate::limits::{FRAME_BYTES_MAX, MESSAGE_BYTES_MAX};

/// Pause before a watch that ended is started again.
const REWATCH_MS: u64 = 200;
const CONNECT_TIMEOUT_MS: u64 = 1_000;

/// Where one slot is served now.
#[derive(Clone, Debug)]
pub struct Route {
    pub slot: u32,
    pub generation: u64,
    pub client: PServerServiceClient<RpcChannel>,
}

/// The table and the channels to its holders.
#[derive(Debug)]
pub struct Routes {
    table: watch::Receiver<PServerTable>,
    channels: Mutex<HashMap<(String, u64), PServerServiceClient<RpcChannel>>>,
    /// The TLS and token of every pserver connection: the master client's own.
    security: Security,
    follower: tokio::task::JoinHandle<()>,
}

impl Routes {
    /// Starts following the master's pserver table.
    pub fn follow(master: Arc<MasterClient>) -> Self {
        let (sender, table) = watch::channel(PServerTable::default());
        let security = master.security().clone();
        let follower = tokio::spawn(follow_table(master, sender));
        Self { table, channels: Mutex::new(HashMap::new()), security, follower }
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
        let entry = table.pservers.iter().find(|entry| entry.index == slot)?;
        let key = (entry.addr.clone(), entry.generation);
        let mut channels = self.channels.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Only current holders stay: a replaced pserver's channel goes with it.
        if !channels.contains_key(&key) {
            channels.retain(|(_, generation), _| {
                table.pservers.iter().any(|held| held.generation == *generation)
            });
            channels.insert(key.clone(), connect(&self.security, &entry.addr)?);
        }
        Some(Route { slot, generation: entry.generation, client: channels[&key].clone() })
    }
}

impl Drop for Routes {
    fn drop(&mut self) {
        self.follower.abort();
    }
}

/// Keeps `sender` at the master's latest table, restarting the watch whenever it ends.
async fn follow_table(master: Arc<MasterClient>, sender: watch::Sender<PServerTable>) {
    loop {
        let mut stream = master.watch_pservers();
        while let Some(next) = stream.next().await {
            match next {
                Ok(table) => {
                    sender.send_replace(table);
                }
                Err(error) => {
                    tracing::warn!(%error, "pserver table watch failed; starting it again")
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(REWATCH_MS)).await;
    }
}

/// A lazily connected client with the windows and message limits of multi-MB payloads.
fn connect(security: &Security, addr: &str) -> Option<PServerServiceClient<RpcChannel>> {
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
    Some(
        PServerServiceClient::new(channel)
            .max_decoding_message_size(MESSAGE_BYTES_MAX)
            .max_encoding_message_size(MESSAGE_BYTES_MAX),
    )
}
