//! Leader discovery: ask every known master at once who leads, and believe the answer from
//! the highest term among the first majority to answer. Not waiting for the rest matters when
//! a master is paused or cut off without a reset: its answer never comes, and waiting out its
//! attempt deadline (2 s) on every rediscovery costs trainers and pservers their leases. A
//! wrong guess (a majority that has not heard of the newest leader yet) costs one redirect.

use super::master_client::service_client;
use super::options::ClientOptions;
use proto::raft::{ClusterInfoReply, ClusterInfoRequest};

/// Returns the leader address reported in the highest term, or why none was found.
pub(crate) async fn discover_leader(
    masters: &[String],
    options: &ClientOptions,
) -> Result<String, String> {
    // Spawned so the asks run concurrently: a dead master costs one timeout, not one each.
    let mut asks = tokio::task::JoinSet::new();
    for addr in masters {
        let (addr, options) = (addr.clone(), options.clone());
        asks.spawn(async move {
            let answer = ask(&addr, &options).await;
            (addr, answer)
        });
    }
    let majority = masters.len() / 2 + 1;
    let mut best: Option<ClusterInfoReply> = None;
    let mut errors = Vec::new();
    let mut answered = 0;
    while let Some(joined) = asks.join_next().await {
        answered += 1;
        let (addr, answer) = match joined {
            Ok(joined) => joined,
            Err(error) => (String::from("?"), Err(error.to_string())),
        };
        match answer {
            Ok(info) if info.leader_addr.is_empty() => {
                errors.push(format!("{addr}: no leader known in term {}", info.term));
            }
            Ok(info) => {
                if best.as_ref().is_none_or(|known| info.term > known.term) {
                    best = Some(info);
                }
            }
            Err(error) => errors.push(format!("{addr}: {error}")),
        }
        if answered >= majority && best.is_some() {
            break;
        }
    }
    best.map(|info| info.leader_addr)
        .ok_or_else(|| format!("no leader found ({})", errors.join("; ")))
}

async fn ask(addr: &str, options: &ClientOptions) -> Result<ClusterInfoReply, String> {
    let mut service = service_client(addr, options).map_err(|error| error.to_string())?;
    let request = super::master_client::timed(ClusterInfoRequest::default(), options.rpc_timeout);
    let reply = service.cluster_info(request).await;
    reply
        .map(tonic::Response::into_inner)
        .map_err(|status| format!("{:?}: {}", status.code(), status.message()))
}
