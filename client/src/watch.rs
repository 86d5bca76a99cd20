//! `PServerWatch`: the pserver table now and after every change (the seeds' "broadcast pserver
//! changes to trainers"). The master ends a watch stream with UNAVAILABLE when it stops
//! leading, and a stream on a master that was paused or cut off fails when its connection's
//! keepalive pings go unanswered; the watch then reconnects to whichever master leads, within
//! the client's call deadline (without limit if it has none), and goes on. Only when no leader
//! answers within that deadline does it yield the error and end. Dropping the watch stops it.

use super::conversions::pserver_table;
use super::error::ClientError;
use super::master_client::MasterClient;
use super::options::{ClientOptions, BACKOFF_MS_MAX};
use super::types::PServerTable;
use proto::master as pb;
use std::time::Duration;
use tokio::sync::mpsc;

/// Tables a slow reader may fall behind by before the watch waits for it.
const WATCH_BUFFER_COUNT: usize = 16;

pub struct PServerWatch {
    tables: mpsc::Receiver<Result<PServerTable, ClientError>>,
    task: tokio::task::JoinHandle<()>,
}

impl PServerWatch {
    pub(crate) fn start(masters: Vec<String>, options: ClientOptions) -> Self {
        let (sender, tables) = mpsc::channel(WATCH_BUFFER_COUNT);
        let task = tokio::spawn(async move {
            if let Err(error) = watch(&masters, options, &sender).await {
                let _ = sender.send(Err(error)).await;
            }
        });
        Self { tables, task }
    }

    /// The next table: the current one first, then one per change. `None` once the watch
    /// ended (after yielding its error).
    pub async fn next(&mut self) -> Option<Result<PServerTable, ClientError>> {
        self.tables.recv().await
    }
}

impl Drop for PServerWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Streams tables into `sender` until it closes, reconnecting after every stream end.
async fn watch(
    masters: &[String],
    options: ClientOptions,
    sender: &mpsc::Sender<Result<PServerTable, ClientError>>,
) -> Result<(), ClientError> {
    let client = MasterClient::new(masters, options)?;
    loop {
        let mut stream = client
            .call("WatchPServers", |mut service| {
                let request = pb::ListPServersRequest { job: client.job().to_string() };
                async move { service.watch_p_servers(request).await }
            })
            .await?;
        while let Ok(Some(table)) = stream.message().await {
            if sender.send(Ok(pserver_table(table))).await.is_err() {
                return Ok(());
            }
        }
        tracing::debug!("pserver watch ended; reconnecting to the leader");
        client.forget_leader();
        tokio::time::sleep(Duration::from_millis(BACKOFF_MS_MAX)).await;
    }
}
