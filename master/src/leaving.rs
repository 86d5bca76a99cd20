//! `--leave-on-stop`: a member whose membership follows its process (a scaled StatefulSet's
//! pod). On a planned stop it asks the group to remove it, once leadership is handed off, and
//! marks its directory as left; started again on a directory whose master left or was removed,
//! it clears the directory and joins anew (`--join`), where a master without the flag refuses
//! to serve from it. A scale-down so leaves no dead voter behind, and a restart of the same
//! pod costs a catch-up instead of an operator's `member remove`.

use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use client::{ClientOptions, MasterClient, MemberChange};
use consensus::ConsensusNode;
use platform::security::Security;

use crate::membership_duties::REMOVED_FILE;
use crate::replicated_state::ReplicatedState;

/// How long a stopping master may take to have itself removed: a joint configuration's two
/// commits, the redirects to the leader, and slack for a loaded machine. Past it the master
/// stops a member still (a later start on its directory serves as that member again).
const LEAVE_MS_MAX: u64 = 10_000;

/// What the directory of a master that left says.
const LEFT_REASON: &str = "it left the group when it stopped (--leave-on-stop)";

/// Asks the group, through the other members, to remove this master, and marks its directory
/// once the removal is committed. Logs and gives up after `LEAVE_MS_MAX`: the master then
/// stops still a member, as without the flag.
pub(crate) async fn leave(
    node: &ConsensusNode<ReplicatedState>,
    data_dir: &Path,
    security: &Security,
) {
    let id = node.id();
    let others: Vec<String> =
        crate::membership_duties::others(node).into_iter().map(|(_, addr)| addr).collect();
    if others.is_empty() {
        tracing::warn!("the only member of its group: it stops a member");
        return;
    }
    let deadline = Duration::from_millis(LEAVE_MS_MAX);
    let options = ClientOptions {
        call_deadline: Some(deadline),
        security: security.clone(),
        ..ClientOptions::default()
    };
    let removal = async {
        let client = MasterClient::new(&others, options)?;
        client.change_member(&MemberChange::Remove { id }).await?;
        anyhow::Ok(())
    };
    match tokio::time::timeout(deadline, removal).await {
        Ok(Ok(())) => match crate::membership_duties::mark_removed(data_dir, LEFT_REASON) {
            Ok(()) => tracing::info!("left the group (--leave-on-stop)"),
            Err(error) => tracing::warn!(%error, "left the group; marking the directory failed"),
        },
        Ok(Err(error)) => tracing::warn!(%error, "could not leave the group; it stops a member"),
        Err(_) => tracing::warn!(
            deadline_ms = LEAVE_MS_MAX,
            "the group did not remove this master in time; it stops a member"
        ),
    }
}

/// With `--leave-on-stop`: clears the directory of a master that left or was removed (`why`),
/// so that this master joins anew (its old log and votes belong to a member the group forgot).
pub(crate) fn clear(data_dir: &Path, why: &str) -> anyhow::Result<()> {
    tracing::info!(
        reason = why,
        dir = %data_dir.display(),
        "this master is no longer a member; clearing its directory to join anew"
    );
    let marker = data_dir.join(REMOVED_FILE);
    let entries =
        std::fs::read_dir(data_dir).with_context(|| format!("list {}", data_dir.display()))?;
    // The marker last: a crash midway leaves a directory that is still cleared next time.
    let mut paths: Vec<_> =
        entries.map(|entry| entry.map(|entry| entry.path())).collect::<Result<_, _>>()?;
    paths.sort_by_key(|path| *path == marker);
    for path in paths {
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        removed.with_context(|| format!("clear {}", path.display()))?;
    }
    Ok(())
}
