//! `MasterClient`'s rendezvous calls: one run's keys (torchrun's rendezvous state and c10d
//! store), written exactly once per call across leader changes, and read (waiting for keys)
//! in rounds of at most the masters' wait cap until the caller's own deadline.

use std::time::Duration;

use super::error::ClientError;
use super::master_client::{timed, MasterClient};
use proto::master as pb;
use tokio::time::Instant;

/// The longest one read asks the masters to wait (they cap it at the same): a longer wait is
/// several reads, each also a chance to follow a new leader.
pub const RENDEZVOUS_WAIT_MS_ROUND: u64 = 10_000;

/// A key's value and the version it was written at (from 1, never reused within the run).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousEntry {
    pub value: Vec<u8>,
    pub version: u64,
}

/// One write to a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RendezvousWrite {
    Set(Vec<u8>),
    /// c10d's compare_set: `value` if the key holds `expected`, or is absent and `expected`
    /// is empty.
    CompareSet {
        expected: Vec<u8>,
        value: Vec<u8>,
    },
    /// `value` if the key's version is `version` (0: only if absent).
    CompareVersion {
        version: u64,
        value: Vec<u8>,
    },
    /// c10d's add on the key's decimal integer.
    Add(i64),
    Delete,
}

/// What a write left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousWritten {
    /// The key after the write (`None`: absent).
    pub entry: Option<RendezvousEntry>,
    /// Whether this write changed it.
    pub set: bool,
    /// `Add`'s sum.
    pub count: i64,
    /// `Delete`: whether the key existed.
    pub existed: bool,
}

/// A run as `ListRendezvous` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RendezvousRun {
    pub run: String,
    pub key_count: u64,
    pub bytes: u64,
    pub idle_ms: u64,
    /// The round raftrain's torch backend last wrote (`RENDEZVOUS_SUMMARY_KEY`), if any.
    pub round: Option<RendezvousRound>,
}

/// Where raftrain's torch backend writes a summary of each round it sets (JSON of
/// [`RendezvousRound`]), for `status`, `rendezvous list` and the dashboard.
pub const RENDEZVOUS_SUMMARY_KEY: &str = "raftrain.rendezvous.summary";
/// A longer summary is not shown.
pub const RENDEZVOUS_SUMMARY_BYTES_MAX: usize = 512;

/// A rendezvous round as the backend summarized it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct RendezvousRound {
    pub round: u64,
    /// Nodes admitted to the round, and nodes waiting for the next one.
    pub participants: u64,
    #[serde(default)]
    pub waiting: u64,
    /// Whether the round completed (the workers started).
    #[serde(default)]
    pub complete: bool,
}

impl std::fmt::Display for RendezvousRound {
    /// `round 3 (complete), 2 participants, 1 waiting`.
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.complete { "complete" } else { "forming" };
        write!(formatter, "round {} ({state}), {} participants", self.round, self.participants)?;
        write!(formatter, ", {} waiting", self.waiting)
    }
}

impl RendezvousRound {
    /// The round a summary's text says, or `None` for text that is not one.
    pub fn parse(text: &str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }
}

impl RendezvousRun {
    /// The run as `raftrain rendezvous list --json` and `status --json` show it.
    pub fn to_json(&self) -> serde_json::Value {
        let round = self.round.as_ref().map(|round| {
            serde_json::json!({
                "round": round.round, "participants": round.participants,
                "waiting": round.waiting, "complete": round.complete,
            })
        });
        serde_json::json!({
            "run": self.run, "keys": self.key_count, "bytes": self.bytes, "idle_ms": self.idle_ms,
            "round": round,
        })
    }
}

impl MasterClient {
    /// Applies `write` to `key` of run `run`, exactly once however often it is retried.
    pub async fn rendezvous_write(
        &self,
        run: &str,
        key: &str,
        write: RendezvousWrite,
    ) -> Result<RendezvousWritten, ClientError> {
        let timeout = self.rpc_timeout();
        let op = op(write);
        let reply = self
            .write("RendezvousWrite", |mut service, stamp| {
                let request = pb::RendezvousWriteRequest {
                    stamp: Some(stamp),
                    run: run.to_string(),
                    key: key.to_string(),
                    op: Some(op.clone()),
                };
                async move { service.rendezvous_write(timed(request, timeout)).await }
            })
            .await?;
        let entry = reply
            .present
            .then(|| RendezvousEntry { value: reply.value.to_vec(), version: reply.version });
        Ok(RendezvousWritten { entry, set: reply.set, count: reply.count, existed: reply.existed })
    }

    /// The entries of `keys` in run `run` (linearizable), waiting up to `wait` for every one
    /// to exist; what exists when the wait ends (absent keys are `None`), and how many keys
    /// the run holds.
    pub async fn rendezvous_read(
        &self,
        run: &str,
        keys: &[String],
        wait: Duration,
    ) -> Result<(Vec<Option<RendezvousEntry>>, u64), ClientError> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let round = left.min(Duration::from_millis(RENDEZVOUS_WAIT_MS_ROUND));
            let reply = self.read_round(run, keys, round).await?;
            let entries: Vec<_> = reply.entries.into_iter().map(entry).collect();
            if entries.iter().all(Option::is_some) || Instant::now() >= deadline {
                return Ok((entries, reply.key_count));
            }
        }
    }

    async fn read_round(
        &self,
        run: &str,
        keys: &[String],
        wait: Duration,
    ) -> Result<pb::RendezvousReadReply, ClientError> {
        let timeout = self.rpc_timeout() + wait;
        let request = pb::RendezvousReadRequest {
            run: run.to_string(),
            keys: keys.to_vec(),
            wait_ms: wait.as_millis() as u64,
            client_id: self.client_id(),
        };
        self.call("RendezvousRead", |mut service| {
            let request = request.clone();
            async move { service.rendezvous_read(timed(request, timeout)).await }
        })
        .await
    }

    /// Every rendezvous run the group holds, and how long an idle one is kept.
    pub async fn list_rendezvous(&self) -> Result<(Vec<RendezvousRun>, u64), ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .call("ListRendezvous", |mut service| async move {
                service.list_rendezvous(timed(pb::ListRendezvousRequest {}, timeout)).await
            })
            .await?;
        let run = |summary: pb::RendezvousRunSummary| RendezvousRun {
            run: summary.run,
            key_count: summary.key_count,
            bytes: summary.bytes,
            idle_ms: summary.idle_ms,
            round: RendezvousRound::parse(&summary.summary),
        };
        Ok((reply.runs.into_iter().map(run).collect(), reply.idle_expiry_ms))
    }

    /// Removes run `run` and its keys; whether it existed.
    pub async fn delete_rendezvous(&self, run: &str) -> Result<bool, ClientError> {
        let timeout = self.rpc_timeout();
        let reply = self
            .write("DeleteRendezvous", |mut service, stamp| {
                let request =
                    pb::DeleteRendezvousRequest { stamp: Some(stamp), run: run.to_string() };
                async move { service.delete_rendezvous(timed(request, timeout)).await }
            })
            .await?;
        Ok(reply.existed)
    }
}

fn op(write: RendezvousWrite) -> pb::rendezvous_write_request::Op {
    use pb::rendezvous_write_request::Op;
    match write {
        RendezvousWrite::Set(value) => Op::Set(value.into()),
        RendezvousWrite::CompareSet { expected, value } => {
            Op::CompareSet(pb::RendezvousCompareSet {
                expected: expected.into(),
                value: value.into(),
            })
        }
        RendezvousWrite::CompareVersion { version, value } => {
            Op::CompareVersion(pb::RendezvousCompareVersion { version, value: value.into() })
        }
        RendezvousWrite::Add(delta) => Op::Add(delta),
        RendezvousWrite::Delete => Op::Delete(true),
    }
}

fn entry(entry: pb::RendezvousEntry) -> Option<RendezvousEntry> {
    entry.present.then(|| RendezvousEntry { value: entry.value.to_vec(), version: entry.version })
}
