//! `KnownMembers`: the group's member addresses as the client last learned them from a
//! leader. Discovery asks them first (then the addresses the client was given), and while a
//! leader serves the client they are asked again in the background every few seconds, so a
//! client started with addresses that have all been replaced since, one by one, keeps finding
//! the group.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

// tokio's clock, not the wall clock: the simulation pauses it, so a run refreshes at the same
// simulated moments however long it takes on the machine (with `std`'s, a loaded machine's
// runs refreshed more often and no longer replayed their seed).
use tokio::time::Instant;

use crate::master_client::{timed, ServiceClient};
use crate::options::ClientOptions;
use proto::raft::ClusterInfoRequest;

/// A leader's member list is asked again when the last answer is older than this.
const REFRESH_EVERY: Duration = Duration::from_secs(3);

#[derive(Clone, Default)]
pub(crate) struct KnownMembers {
    known: Arc<Mutex<Known>>,
}

#[derive(Default)]
struct Known {
    members: Vec<String>,
    /// When the members were last learned or asked for.
    refreshed: Option<Instant>,
}

impl KnownMembers {
    /// The members last learned (empty before any).
    pub(crate) fn members(&self) -> Vec<String> {
        self.lock().members.clone()
    }

    /// Keeps `members` (those that make a client) as the addresses to ask first.
    pub(crate) fn learn(&self, members: &[String], options: &ClientOptions) {
        let usable: Vec<String> = members
            .iter()
            .filter(|addr| crate::master_client::endpoint(addr, options).is_ok())
            .cloned()
            .collect();
        let mut known = self.lock();
        known.refreshed = Some(Instant::now());
        if !usable.is_empty() && known.members != usable {
            tracing::debug!(members = ?usable, "the group's members");
            known.members = usable;
        }
    }

    /// Asks the leader (on `service`, the connection the client already holds to it: no new
    /// connection per refresh) for the members in the background when the last answer is stale.
    pub(crate) fn refresh_if_stale(&self, service: &ServiceClient, options: &ClientOptions) {
        {
            let mut known = self.lock();
            if known.refreshed.is_some_and(|at| at.elapsed() < REFRESH_EVERY) {
                return;
            }
            // One ask at a time: the next is due a whole period from now.
            known.refreshed = Some(Instant::now());
        }
        let (this, mut service, options) = (self.clone(), service.clone(), options.clone());
        tokio::spawn(async move {
            let request = timed(ClusterInfoRequest::default(), options.rpc_timeout);
            if let Ok(info) = service.cluster_info(request).await {
                let members: Vec<String> =
                    info.into_inner().members.into_iter().map(|member| member.addr).collect();
                this.learn(&members, &options);
            }
        });
    }

    fn lock(&self) -> MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
