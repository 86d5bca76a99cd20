//! A master's part in membership changes. With `--join` it asks the group (through any of the
//! given masters, following the leader) to add it as a learner and then to promote it once it
//! caught up, retrying until it is a voter. Every master watches for its own removal: the
//! leader stops sending a member the log as soon as it appends the entry that removes it, so a
//! removed master may never see that entry and must ask. While it is not the leader it asks the
//! other members who leads and who the members are; a leader whose membership leaves out this
//! master and was set by a later entry than this master's own applied membership (committed,
//! never undone), which listed it, means it was removed. (Not the terms: a removed voter hears no leader and campaigns, so
//! its term passes the group's.) It then writes `REMOVED` in its data directory, stops, and refuses
//! to start on that directory again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use client::{ClientOptions, MasterClient, MemberChange};
use consensus::ConsensusNode;
use platform::security::Security;

use crate::replicated_state::ReplicatedState;

/// The file a removed master leaves in its data directory.
pub(crate) const REMOVED_FILE: &str = "REMOVED";
/// How often a master that is not the leader asks whether it is still a member.
const REMOVAL_ASK_EVERY_MS: u64 = 2_000;
/// How long a joining master waits between two attempts.
const JOIN_RETRY_MS: u64 = 1_000;

/// Refuses to start on a data directory whose master was removed from its group.
pub(crate) fn refuse_if_removed(data_dir: &Path) -> anyhow::Result<()> {
    let marker = data_dir.join(REMOVED_FILE);
    match std::fs::read_to_string(&marker) {
        Ok(why) => anyhow::bail!(
            "{}: this master was removed from its group ({}); it does not serve again from this \
             directory: add it anew with an empty --data-dir (`--join`)",
            marker.display(),
            why.trim()
        ),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error).with_context(|| format!("read {}", marker.display())),
    }
}

/// Asks the group to add this master and promote it, until it is a voter of its own
/// membership. Never returns an error: it logs each failed attempt and tries again.
pub(crate) async fn join_group(
    node: ConsensusNode<ReplicatedState>,
    join: Vec<String>,
    advertise: String,
    security: Security,
) {
    let id = node.id();
    let options = ClientOptions {
        call_deadline: Some(Duration::from_secs(30)),
        security,
        ..ClientOptions::default()
    };
    let client = match MasterClient::new(&join, options) {
        Ok(client) => client,
        Err(error) => {
            tracing::error!(%error, "--join names masters no client can reach");
            return;
        }
    };
    let changes = [MemberChange::Add { id, addr: advertise }, MemberChange::Promote { id }];
    while !is_voter(&node) {
        let mut failed = None;
        for change in &changes {
            if let Err(error) = client.change_member(change).await {
                failed = Some(error);
                break;
            }
        }
        match failed {
            None => tracing::info!("joined the group as a voter"),
            Some(error) => {
                tracing::warn!(%error, "asking to join the group failed; trying again");
                tokio::time::sleep(Duration::from_millis(JOIN_RETRY_MS)).await;
            }
        }
    }
}

/// Whether this master is a voter of a uniform configuration: in a joint one (a change left
/// halfway by a leader that stopped) it asks again, and the promotion ends it.
fn is_voter(node: &ConsensusNode<ReplicatedState>) -> bool {
    let metrics = node.metrics();
    let metrics = metrics.borrow();
    let membership = metrics.membership_config.membership();
    let uniform = membership.get_joint_config().len() == 1;
    uniform && membership.voter_ids().any(|voter| voter == metrics.id)
}

/// Resolves once this master learns it was removed, after writing `REMOVED` in `data_dir`:
/// why, for the exit message.
pub(crate) async fn removed(node: ConsensusNode<ReplicatedState>, data_dir: PathBuf) -> String {
    let probe = node.grpc_member_levels();
    loop {
        tokio::time::sleep(Duration::from_millis(REMOVAL_ASK_EVERY_MS)).await;
        let Some((own_index, asked)) = others_to_ask(&node) else { continue };
        for (id, addr) in asked {
            let Ok(info) = probe.cluster_info(id, &addr).await else { continue };
            let leads = info.leader_id == info.node_id && info.node_id != 0;
            let listed = info.members.iter().any(|member| member.id == node.id());
            if leads && info.membership_index > own_index && !listed {
                let members: Vec<u64> = info.members.iter().map(|member| member.id).collect();
                let why = format!(
                    "the leader, member {id} in term {}, lists members {members:?}",
                    info.term
                );
                if let Err(error) = std::fs::write(data_dir.join(REMOVED_FILE), &why) {
                    tracing::error!(%error, "cannot write the REMOVED marker");
                }
                return why;
            }
        }
    }
}

/// The index of this master's applied membership and the other members to ask, when this
/// master is not the leader and its applied membership (committed: never undone) lists it.
fn others_to_ask(node: &ConsensusNode<ReplicatedState>) -> Option<(u64, Vec<(u64, String)>)> {
    if node.is_leader() {
        return None;
    }
    let (own_index, applied) = node.applied_membership();
    if !applied.contains(&node.id()) {
        return None;
    }
    let metrics = node.metrics();
    let metrics = metrics.borrow();
    let others = metrics
        .membership_config
        .membership()
        .nodes()
        .filter(|(id, _)| **id != metrics.id)
        .map(|(id, node)| (*id, node.addr.clone()))
        .collect();
    Some((own_index, others))
}
