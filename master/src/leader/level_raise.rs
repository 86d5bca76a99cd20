//! The leader's feature-level duty: while the group runs a lower feature level than this
//! build's, ask every other member what it decodes (`consensus::MemberLevels`) and, once all of
//! them answer at least a higher level, propose `RaiseFeatureLevel` to the lowest level heard.
//! What the last round heard is kept ([`LevelsHeard`]) so the proposer can tell a client whether
//! a refused command waits for a raise under way (try again) or for an upgrade (refused).

use std::sync::{Arc, Mutex};

use consensus::{ask_all, MemberLevels};

use super::decisions::decide;
use crate::service::Proposer;
use client::answered_feature_level;

use crate::state::Command;

/// How often the leader asks while a raise is possible.
const ASK_EVERY_MS: u64 = 300;

/// What the leader heard in its last round of asking, in which term.
#[derive(Default)]
pub(crate) struct LevelsHeard {
    heard: Mutex<Option<Heard>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Heard {
    term: u64,
    /// The lowest level any member answered (this node's own included); `None` when some
    /// member did not answer.
    lowest: Option<u32>,
}

/// Why the group does not admit a command of a higher level yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LevelWait {
    /// Every member decodes it: the raise is under way; try again shortly.
    Raising,
    /// Not every member answered yet in this term; try again.
    Unheard,
    /// A member decodes only `lowest`: an upgrade is needed.
    OlderMember { lowest: u32 },
}

impl LevelsHeard {
    /// Why a command of level `needed` waits, as heard in `term`.
    pub(crate) fn wait_for(&self, term: u64, needed: u32) -> LevelWait {
        let heard = *self.heard.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match heard.filter(|heard| heard.term == term).and_then(|heard| heard.lowest) {
            Some(lowest) if lowest >= needed => LevelWait::Raising,
            Some(lowest) => LevelWait::OlderMember { lowest },
            None => LevelWait::Unheard,
        }
    }

    fn record(&self, heard: Heard) {
        *self.heard.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(heard);
    }
}

/// Asks and raises until `stop` turns true.
pub(crate) async fn run_level_raise(
    proposer: Proposer,
    probe: Arc<dyn MemberLevels>,
    heard: Arc<LevelsHeard>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticks = super::ticks::every(ASK_EVERY_MS);
    let mut applied_level = proposer.node().read(|state| state.state().feature_level());
    while super::ticks::next(&mut ticks, &mut stop).await {
        snapshot_a_raise(&proposer, &mut applied_level).await;
        raise_if_all_decode(&proposer, probe.as_ref(), &heard).await;
    }
}

/// Every replica snapshots once it applied a raise: its data directory then holds a snapshot
/// of the new level, which a build before feature levels refuses to open (a layout it does not
/// know), so putting such a build back on it fails at start instead of misreading the log.
async fn snapshot_a_raise(proposer: &Proposer, applied_level: &mut u32) {
    let level = proposer.node().read(|state| state.state().feature_level());
    if level <= *applied_level {
        return;
    }
    *applied_level = level;
    tracing::info!(feature_level = level, "the group runs a newer feature level: snapshotting it");
    if let Err(error) = proposer.node().raft().trigger().snapshot().await {
        tracing::warn!(%error, "no snapshot of the raised feature level");
    }
}

/// One round: if this node leads a group below its own level, ask the others and raise.
async fn raise_if_all_decode(proposer: &Proposer, probe: &dyn MemberLevels, heard: &LevelsHeard) {
    let node = proposer.node();
    let term = node.term();
    let own = answered_feature_level(node.feature_level());
    let group = node.read(|state| state.state().feature_level());
    if !node.is_leader() || own <= group {
        return;
    }
    let info = node.cluster_info();
    let others = info.members.iter().filter(|member| member.id != node.id());
    let others = others.map(|member| (member.id, member.addr.clone())).collect::<Vec<_>>();
    let answers = ask_all(probe, &others).await;
    let lowest = answers.values().try_fold(own, |lowest, answer| {
        answer.map(|answer| lowest.min(answered_feature_level(answer)))
    });
    heard.record(Heard { term, lowest });
    match lowest {
        Some(level) if level > group => {
            tracing::info!(
                from = group,
                to = level,
                term,
                "every member decodes a newer feature level; raising the group's"
            );
            decide(proposer, term, Command::RaiseFeatureLevel { level }).await;
        }
        Some(level) => {
            tracing::debug!(
                group_level = group,
                lowest_level = level,
                ?answers,
                "a member decodes no newer feature level"
            );
        }
        None => tracing::debug!(?answers, "a member did not say its feature level"),
    }
}
