//! Feature levels: which kinds of command a group may carry. Each kind of [`Command`] belongs to
//! the level that introduced it; a build decodes every kind up to [`FEATURE_LEVEL`]. The
//! group's level is replicated state (`MasterState::feature_level`), raised only by a leader
//! decision ([`Command::RaiseFeatureLevel`]) taken once every member said it decodes the new
//! level, and never lowered; a leader proposes a command only if the group's level covers it.
//! So a replica never meets a command it cannot decode unless it runs an older build than the
//! group's level: then it stops (`ApplyError`, "upgrade this master") instead of answering it
//! differently from the others.
//!
//! Level 1 is every command of the builds before levels (they answer a level of 0); level 2
//! adds the rendezvous key space, restart, idle expiry, shuffled reports and the raise itself;
//! level 3 the task hand-off in one entry (`FinishedThenGetTask`).

use super::command::Command;
use super::request::{decode_request, Request};

/// The newest feature level this build decodes and admits.
pub const FEATURE_LEVEL: u32 = 3;
/// The level of a state that names none (a group of builds before levels).
pub const BASE_FEATURE_LEVEL: u32 = 1;

impl Command {
    /// The feature level that introduced this kind of command (a job's command: its own).
    pub fn feature_level(&self) -> u32 {
        match self {
            Command::InJob { command, .. } => command.feature_level(),
            Command::FinishedThenGetTask { .. } => 3,
            Command::Rendezvous { .. }
            | Command::RemoveRendezvous { .. }
            | Command::RestartJob
            | Command::CancelIdleJob { .. }
            | Command::ShuffledReport { .. }
            | Command::RaiseFeatureLevel { .. } => 2,
            Command::ReportDataset { .. }
            | Command::GetTask { .. }
            | Command::TaskFinished { .. }
            | Command::TaskFailed { .. }
            | Command::ExpireTasks
            | Command::RegisterTrainer { .. }
            | Command::TrainerLost { .. }
            | Command::ClaimPServerSlot { .. }
            | Command::ReleasePServerSlot { .. }
            | Command::RecordCheckpoint { .. }
            | Command::RecordEval { .. }
            | Command::ReportDatasetBatch { .. }
            | Command::TaskFailedWithFault { .. }
            | Command::ClaimPServerSlotWithSecret { .. }
            | Command::ReportIndexDataset { .. }
            | Command::CancelJob
            | Command::CheckpointJob
            | Command::RestoreJob { .. }
            | Command::RemoveJob { .. }
            | Command::CheckpointProgress
            | Command::RestoreProgress { .. }
            | Command::TagSlotCheckpoint { .. }
            | Command::SlotReloaded { .. }
            | Command::TaskProgress { .. } => BASE_FEATURE_LEVEL,
        }
    }
}

/// A committed request this replica cannot apply: it must stop rather than diverge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unappliable {
    #[error(
        "the entry does not decode ({reason}): a newer build proposed it; this build decodes \
         feature level {FEATURE_LEVEL}: upgrade this master"
    )]
    Undecodable { reason: String },
    #[error(
        "the group raised its feature level to {level}; this master admits up to {admitted} \
         (its build decodes {FEATURE_LEVEL}; --feature-level may hold it lower): upgrade this \
         master, or lift its hold"
    )]
    NewerLevel { level: u32, admitted: u32 },
}

/// Decodes a committed entry, or says why a replica admitting up to level `admitted` cannot
/// apply it.
pub(crate) fn appliable_request(bytes: &[u8], admitted: u32) -> Result<Request, Unappliable> {
    let request = decode_request(bytes)
        .map_err(|error| Unappliable::Undecodable { reason: error.to_string() })?;
    match request.command {
        Command::RaiseFeatureLevel { level } if level > admitted.min(FEATURE_LEVEL) => {
            Err(Unappliable::NewerLevel { level, admitted })
        }
        _ => Ok(request),
    }
}
