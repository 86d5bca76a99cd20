//! Leader discovery: ask every known master at once who leads, and believe the answer from
//! the highest term.

use super::discovery_error::{AskFailure, DiscoveryError, Unanswered};
use super::master_client::service_client;
use super::options::ClientOptions;
use proto::raft::{ClusterInfoReply, ClusterInfoRequest};

/// The leader found, and the group's members as the answer that named it lists them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Discovered {
    pub(crate) leader_addr: String,
    /// Every member's address (voters and learners), so a client started with addresses that
    /// have since been replaced keeps finding the group.
    pub(crate) members: Vec<String>,
}

/// Returns the leader reported in the highest term, or what each master answered.
pub(crate) async fn discover_leader(
    masters: &[String],
    options: &ClientOptions,
) -> Result<Discovered, DiscoveryError> {
    // Spawned so the asks run concurrently: a dead master costs one timeout, not one each.
    let asks: Vec<_> = masters
        .iter()
        .map(|addr| {
            let (addr, options) = (addr.clone(), options.clone());
            tokio::spawn(async move { ask(&addr, &options).await })
        })
        .collect();
    let mut best: Option<ClusterInfoReply> = None;
    let mut unanswered = Vec::new();
    for (addr, ask) in masters.iter().zip(asks) {
        let answer = ask
            .await
            .map_err(|error| AskFailure::AskerLost { reason: error.to_string() })
            .and_then(|answer| answer);
        let reason = match answer {
            Ok(info) if info.leader_addr.is_empty() => {
                AskFailure::NoLeaderKnown { term: info.term }
            }
            Ok(info) => {
                if best.as_ref().is_none_or(|known| info.term > known.term) {
                    best = Some(info);
                }
                continue;
            }
            Err(reason) => reason,
        };
        unanswered.push(Unanswered { addr: addr.clone(), reason });
    }
    let best = best.ok_or(DiscoveryError::NoLeader { masters: unanswered })?;
    let members = best.members.iter().map(|member| member.addr.clone()).collect();
    Ok(Discovered { leader_addr: best.leader_addr, members })
}

async fn ask(addr: &str, options: &ClientOptions) -> Result<ClusterInfoReply, AskFailure> {
    let mut service = service_client(addr, options).map_err(AskFailure::BadAddress)?;
    let request = super::master_client::timed(ClusterInfoRequest::default(), options.rpc_timeout);
    let reply = service.cluster_info(request).await;
    reply.map(tonic::Response::into_inner).map_err(|status| AskFailure::Status {
        code: status.code(),
        message: status.message().to_string(),
    })
}
