//! What the masters say over the wire: a client of the whole group, which master leads, and
//! whether a restarted master is back in the group (recorded in the history as a rejoin).

use std::time::{Duration, Instant};

use client::{ClientOptions, MasterClient};

use super::{Cluster, REJOIN_WAIT_MS_MAX};
use crate::history::{History, OpKind, Operation, Value, SUPERVISOR_PROCESS};

/// How often a restarted master is asked whether it is back.
const REJOIN_POLL_MS: u64 = 200;

impl Cluster {
    /// A client of the whole group with `deadline` per logical call.
    pub fn client(&self, deadline: Duration) -> anyhow::Result<MasterClient> {
        let options = ClientOptions {
            call_deadline: Some(deadline),
            rpc_timeout: Duration::from_millis(500).min(deadline),
            ..ClientOptions::default()
        };
        Ok(MasterClient::new(&self.master_addrs, options)?)
    }

    /// The master (index) that the highest term's answers name as leader, if any answers.
    pub async fn leader(&self) -> Option<usize> {
        let client = self.client(Duration::from_millis(500)).ok()?;
        let mut best: Option<(u64, u64)> = None;
        for addr in &self.master_addrs {
            let Ok(info) = client.member_info(addr).await else { continue };
            let Some(leader_id) = info.leader_id else { continue };
            if best.is_none_or(|(term, _)| info.term > term) {
                best = Some((info.term, leader_id));
            }
        }
        best.map(|(_, leader)| leader as usize - 1)
    }

    /// Waits until restarted master `index` is back in the group: it answers, follows a
    /// leader (or leads) and has applied what the leader had applied when asked. How long
    /// that took, or `None` after [`REJOIN_WAIT_MS_MAX`].
    pub async fn wait_rejoined(&self, index: usize) -> Option<Duration> {
        let started = Instant::now();
        let limit = Duration::from_millis(REJOIN_WAIT_MS_MAX);
        let client = self.client(Duration::from_secs(1)).ok()?;
        while started.elapsed() < limit {
            if self.is_caught_up(&client, index).await {
                return Some(started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(REJOIN_POLL_MS)).await;
        }
        None
    }

    /// Whether master `index` itself answers, names a leader of the current term that
    /// agrees, and (unless it leads) has applied what that leader had applied.
    async fn is_caught_up(&self, client: &MasterClient, index: usize) -> bool {
        let Ok(member) = client.member_info(&self.master_addrs[index]).await else {
            return false;
        };
        let Some(leader) = member.leader_id.and_then(|id| (id as usize).checked_sub(1)) else {
            return false;
        };
        let Some(leader_addr) = self.master_addrs.get(leader) else { return false };
        let Ok(leading) = client.member_info(leader_addr).await else { return false };
        let agreed = leading.leader_id == member.leader_id && leading.term == member.term;
        agreed && (leader == index || member.last_applied_index >= leading.last_applied_index)
    }

    /// Records restarted master `index`'s rejoin (or that it did not within the bound).
    pub async fn record_rejoin(&self, index: usize, history: &History) {
        let f = Operation::Rejoin { master: index as u64 + 1 };
        history.record(SUPERVISOR_PROCESS, OpKind::Invoke, f.clone(), Value::None);
        let (kind, value) = match self.wait_rejoined(index).await {
            Some(took) => (OpKind::Ok, Value::Elapsed { elapsed_ms: took.as_millis() as u64 }),
            None => (OpKind::Info, Value::Elapsed { elapsed_ms: REJOIN_WAIT_MS_MAX }),
        };
        history.record(SUPERVISOR_PROCESS, kind, f, value);
    }
}
