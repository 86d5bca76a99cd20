//! Which member of the job a stamped request's client is: what binds a client to a trainer or
//! a slot, what a request speaks for, and which bindings a command ended.
//!
//! Everything here reads only the replicated state (the trainer registry, the slot holders,
//! the command and its answer), so every replica binds the same clients.

use super::command::Command;
use super::pserver_slots::PServerSlots;
use super::response::Response;
use super::sessions::{Member, Sessions, STRANGER_SESSION_COUNT_MAX};
use super::trainer_registry::TrainerRegistry;
use super::violation::InvariantViolation;

/// Whether `member` is still part of the job.
pub(crate) fn is_alive(member: Member, trainers: &TrainerRegistry, slots: &PServerSlots) -> bool {
    match member {
        Member::Trainer(trainer) => trainers.contains(trainer),
        Member::Slot { slot, generation } => slots.holds(slot, generation),
    }
}

/// The member a command makes: a registration's trainer, a claim's slot. Only the client that
/// sent the command gets the answer, so only it can be bound to the new member.
pub(crate) fn created(response: &Response) -> Option<Member> {
    match response {
        Response::TrainerRegistered { trainer } => Some(Member::Trainer(*trainer)),
        Response::SlotClaimed { slot, generation, .. } => {
            Some(Member::Slot { slot: *slot, generation: *generation })
        }
        _ => None,
    }
}

/// Whether a new client sending `command` must be admitted whatever the strangers' pool
/// holds: it registers, claims, or speaks for a live member no client is bound to yet.
pub(crate) fn joins(
    command: &Command,
    trainers: &TrainerRegistry,
    slots: &PServerSlots,
    sessions: &Sessions,
) -> bool {
    let joining = matches!(
        command,
        Command::RegisterTrainer { .. }
            | Command::ClaimPServerSlot { .. }
            | Command::ClaimPServerSlotWithSecret { .. }
    );
    joining || unbound_spoken_for(command, trainers, slots, sessions).is_some()
}

/// The live member `command` names, if no client is bound to it: a trainer registered by a
/// build that kept no bindings, or one whose client registered again under a new id. Binding
/// its first caller keeps the pools bounded (one client per member).
pub(crate) fn unbound_spoken_for(
    command: &Command,
    trainers: &TrainerRegistry,
    slots: &PServerSlots,
    sessions: &Sessions,
) -> Option<Member> {
    let member = match command {
        Command::GetTask { trainer, .. } | Command::FinishedThenGetTask { trainer, .. } => {
            Member::Trainer(*trainer)
        }
        Command::ReleasePServerSlot { slot, generation }
        | Command::RecordCheckpoint { slot, generation, .. }
        | Command::TagSlotCheckpoint { slot, generation, .. }
        | Command::SlotReloaded { slot, generation, .. } => {
            Member::Slot { slot: *slot, generation: *generation }
        }
        _ => return None,
    };
    (is_alive(member, trainers, slots) && !sessions.is_bound(member)).then_some(member)
}

/// The members whose bindings `command` (answered `response`) may have ended: a lost trainer,
/// every binding of a released or claimed slot. The caller keeps those still alive.
pub(crate) fn maybe_gone(
    command: &Command,
    response: &Response,
    sessions: &Sessions,
) -> Vec<Member> {
    match (command, response) {
        (Command::TrainerLost { trainer }, _) => vec![Member::Trainer(*trainer)],
        (Command::ReleasePServerSlot { slot, .. }, _) => sessions.slot_members(*slot),
        (_, Response::SlotClaimed { slot, .. }) => sessions.slot_members(*slot),
        _ => Vec::new(),
    }
}

/// The pools' sizes, in O(1): the indices together count the sessions, strangers fill at most
/// their pool, and no more clients are bound than members are alive (one client per member,
/// live members only), so the members' pool is bounded by the trainer and slot limits.
pub(crate) fn check_pool_counts(
    sessions: &Sessions,
    trainers: &TrainerRegistry,
    slots: &PServerSlots,
) -> Result<(), InvariantViolation> {
    let (stranger_count, bound) = (sessions.strangers_by_age.len(), sessions.by_member.len());
    if stranger_count + bound != sessions.sessions.len() {
        return Err(InvariantViolation::SessionIndexMismatch);
    }
    if stranger_count > STRANGER_SESSION_COUNT_MAX {
        return Err(InvariantViolation::TooManySessions {
            count: stranger_count as u64,
            count_max: STRANGER_SESSION_COUNT_MAX as u64,
        });
    }
    let alive = trainers.trainers.len() + slots.holders.len();
    if bound > alive {
        return Err(InvariantViolation::TooManyMemberSessions {
            bound: bound as u64,
            alive: alive as u64,
        });
    }
    Ok(())
}

/// Every bound member is alive: O(members).
pub(crate) fn check_bindings(
    sessions: &Sessions,
    trainers: &TrainerRegistry,
    slots: &PServerSlots,
) -> Result<(), InvariantViolation> {
    match sessions.members().find(|member| !is_alive(*member, trainers, slots)) {
        Some(member) => {
            Err(InvariantViolation::SessionOfGoneMember { member: format!("{member:?}") })
        }
        None => Ok(()),
    }
}
