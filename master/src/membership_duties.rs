//! A master's part in membership changes. With `--join` it asks the group (through any of the
//! given masters, following the leader) to add it as a learner and then to promote it once it
//! caught up, retrying until it is a voter. Every master watches for its own removal: the
//! leader stops sending a member the log as soon as it appends the entry that removes it, so a
//! removed master may never see that entry and must ask. While it is not the leader it asks the
//! other members who leads and who the members are; a leader whose membership leaves out this
//! master and was set by a later entry than the last membership this master applied (committed,
//! never undone) that listed it means it was removed. (Not the terms: a removed voter hears no leader and campaigns, so
//! its term passes the group's.) It then writes `REMOVED` in its data directory, stops, and refuses
//! to start on that directory again. A `--join` master also notes the first committed
//! membership that listed it (`join_record.rs`): a later one that leaves it out removed it, so
//! it never asks to be added again once removed, even by a removal made while it still asked
//! or while it was down. A leader also finishes a membership change it finds left
//! half done (a joint configuration that outlived its change: the leader that proposed it died
//! between its two commits, or its caller gave up).

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use client::{ClientOptions, MasterClient, MemberChange};
use consensus::ConsensusNode;
use platform::security::Security;

use crate::config::MasterConfig;
use crate::join_record::{JoinRecord, Standing};
use crate::replicated_state::ReplicatedState;

/// The file a removed master leaves in its data directory.
pub(crate) const REMOVED_FILE: &str = "REMOVED";
/// How often a master that is not the leader asks whether it is still a member.
const REMOVAL_ASK_EVERY_MS: u64 = 2_000;
/// How long a joining master waits between two attempts.
const JOIN_RETRY_MS: u64 = 1_000;
/// How often a leader looks for a change left half done. A change's own two commits take
/// milliseconds; a joint configuration seen at two looks in a row was abandoned.
const HALF_DONE_LOOK_MS: u64 = 2_000;

/// Readies the data directory before the node opens it: one whose master left or was removed
/// (`REMOVED` in it) is cleared with --leave-on-stop (it joins anew), refused otherwise.
pub(crate) fn check_directory(config: &MasterConfig) -> anyhow::Result<()> {
    let marker = config.data_dir.join(REMOVED_FILE);
    let why = match std::fs::read_to_string(&marker) {
        Ok(why) => why,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error).with_context(|| format!("read {}", marker.display())),
    };
    if config.leave_on_stop {
        return crate::leaving::clear(&config.data_dir, why.trim());
    }
    anyhow::bail!(
        "{}: this master was removed from its group ({}); it does not serve again from this \
         directory: add it anew with an empty --data-dir (`--join`)",
        marker.display(),
        why.trim()
    )
}

/// Starts this master's membership duties: asking to join (with `--join`), and finishing
/// changes left half done while it leads. The future they return resolves once this master
/// learns it was removed ([`removed`]); dropping it ends the duties it drives, the asking to
/// join among them (a master leaving on stop must not ask to be added back).
pub(crate) fn start(
    node: &ConsensusNode<ReplicatedState>,
    config: &MasterConfig,
    security: &Security,
) -> anyhow::Result<impl std::future::Future<Output = String>> {
    let record = Arc::new(JoinRecord::open(&config.data_dir)?);
    let join = match &config.join {
        Some(join) => Some((join.clone(), config.advertised()?, security.clone())),
        None => None,
    };
    let joining = {
        let (node, record, data_dir) = (node.clone(), record.clone(), config.data_dir.clone());
        async move {
            if let Some((join, advertised, security)) = join {
                let asked = Joiner { node, record, join, advertise: advertised, security };
                if let Some(why) = asked.join_group().await {
                    return removed_because(&data_dir, why);
                }
            }
            std::future::pending::<String>().await
        }
    };
    let (node, data_dir) = (node.clone(), config.data_dir.clone());
    Ok(async move {
        tokio::select! {
            why = removed(node.clone(), record, data_dir) => why,
            never = finish_half_done_changes(node) => match never {},
            why = joining => why,
        }
    })
}

/// A `--join` master's asking: its node, its admission record, the masters to ask, and the
/// address it is reached at.
struct Joiner {
    node: ConsensusNode<ReplicatedState>,
    record: Arc<JoinRecord>,
    join: Vec<String>,
    advertise: String,
    security: Security,
}

impl Joiner {
    /// Asks the group to add this master and promote it, until the leader lists it a voter of
    /// a whole membership (no change half done); while a change is under way it waits for its
    /// end and asks nothing. The leader's list decides, not this master's own log: a joiner
    /// killed during its catch-up restarts on the start of the group's log, where its id may
    /// be a founding voter (the fault harness's membership nemesis found such a learner asking
    /// nothing and staying a learner). Once a committed membership listed this directory's
    /// master ([`JoinRecord`]), a later one that leaves it out removed it: it asks nothing more
    /// and answers why (an operator's removal is never undone by a join still asking). Logs
    /// each failed attempt and tries again.
    async fn join_group(self) -> Option<String> {
        let id = self.node.id();
        let options = ClientOptions {
            call_deadline: Some(Duration::from_secs(30)),
            security: self.security.clone(),
            ..ClientOptions::default()
        };
        let client = match MasterClient::new(&self.join, options) {
            Ok(client) => client,
            Err(error) => {
                tracing::error!(%error, "--join names masters no client can reach");
                return None;
            }
        };
        loop {
            let standing = match client.members().await {
                Ok(members) if members.joint => {
                    // A change is under way (its own promotion, or a removal of this master
                    // that an operator asked for): its outcome decides.
                    tokio::time::sleep(Duration::from_millis(JOIN_RETRY_MS)).await;
                    continue;
                }
                Ok(members) => Some(self.record.standing(&members, id)),
                Err(_) => None,
            };
            let changes = match standing {
                Some(Standing::Voter) => {
                    tracing::info!("a voter of the group");
                    return None;
                }
                Some(Standing::Removed(why)) => return Some(why),
                Some(Standing::Learner) => vec![MemberChange::Promote { id }],
                Some(Standing::Absent) | None => vec![
                    MemberChange::Add { id, addr: self.advertise.clone() },
                    MemberChange::Promote { id },
                ],
            };
            if let Err(error) = self.ask(&client, &changes).await {
                tracing::warn!(%error, "asking to join the group failed; trying again");
                tokio::time::sleep(Duration::from_millis(JOIN_RETRY_MS)).await;
            }
        }
    }

    /// Asks for `changes` in order, noting the first committed membership that lists this
    /// master (a change is answered once the membership it made is applied).
    async fn ask(&self, client: &MasterClient, changes: &[MemberChange]) -> anyhow::Result<()> {
        for change in changes {
            let members = client.change_member(change).await?;
            self.record.note_committed(&members, self.node.id())?;
        }
        Ok(())
    }
}

/// While this master leads, completes a membership change left half done: a joint
/// configuration set by the same entry at two looks in a row. Runs until dropped.
async fn finish_half_done_changes(node: ConsensusNode<ReplicatedState>) -> Infallible {
    let mut seen = None;
    loop {
        tokio::time::sleep(Duration::from_millis(HALF_DONE_LOOK_MS)).await;
        let half_done = node.half_done_change();
        if let Some(index) = half_done.filter(|index| seen == Some(*index)) {
            match node.finish_change(index).await {
                Ok(_) => tracing::info!(index, "a membership change left half done is finished"),
                Err(error) => tracing::warn!(%error, index, "finishing a half-done change failed"),
            }
        }
        seen = half_done;
    }
}

/// Resolves once this master learns it was removed, after writing `REMOVED` in `data_dir`:
/// why, for the exit message. Only a leader's view decides: a leader whose membership, set by a
/// later entry than the last applied membership that listed this master (noted as each is
/// applied: a master restarted on a log that ends in its own removal still finds the one before
/// it), or than the first committed membership that listed this `--join` master
/// ([`JoinRecord`]), leaves it out. Asked every 2 s, the first time 2 s after start.
async fn removed(
    node: ConsensusNode<ReplicatedState>,
    record: Arc<JoinRecord>,
    data_dir: PathBuf,
) -> String {
    let probe = node.grpc_member_levels();
    loop {
        tokio::time::sleep(Duration::from_millis(REMOVAL_ASK_EVERY_MS)).await;
        let listed = node.last_listed().max(record.listed_at());
        let Some(own_index) = listed.filter(|_| !node.is_leader()) else { continue };
        for (id, addr) in others(&node) {
            let Ok(info) = probe.cluster_info(id, &addr).await else { continue };
            if info.leader_id != info.node_id || info.node_id == 0 {
                continue;
            }
            // The leader answered: its view decides, and the others need not be asked.
            let listed = info.members.iter().any(|member| member.id == node.id());
            if info.membership_index > own_index && !listed {
                let members: Vec<u64> = info.members.iter().map(|member| member.id).collect();
                let why = format!(
                    "the leader, member {id} in term {}, lists members {members:?}",
                    info.term
                );
                return removed_because(&data_dir, why);
            }
            break;
        }
    }
}

/// Leaves the `REMOVED` marker saying `why`; `why` again, for the exit message.
fn removed_because(data_dir: &Path, why: String) -> String {
    if let Err(error) = mark_removed(data_dir, &why) {
        tracing::error!(%error, "cannot write the REMOVED marker");
    }
    why
}

/// Writes the `REMOVED` marker saying `why`, durably: the one way a directory is marked, by a
/// removed master and by one that left (`leaving.rs`).
pub(crate) fn mark_removed(data_dir: &Path, why: &str) -> std::io::Result<()> {
    storage::durable_file::write_durably(data_dir, REMOVED_FILE, why.as_bytes()).map(|_| ())
}

/// The other members this master's membership lists, to ask.
pub(crate) fn others(node: &ConsensusNode<ReplicatedState>) -> Vec<(u64, String)> {
    let metrics = node.metrics();
    let metrics = metrics.borrow();
    let membership = metrics.membership_config.membership();
    let others = membership.nodes().filter(|(id, _)| **id != metrics.id);
    others.map(|(id, node)| (*id, node.addr.clone())).collect()
}
