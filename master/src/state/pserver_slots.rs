//! The pserver slots (`/ps/<index>` and `/ps_desired` in the seeds), their holders'
//! generations, and their checkpoints.
//!
//! Ownership is fenced: every claim that gives a slot to a holder draws a new generation from
//! one replicated counter, and every later act of the holder (heartbeat, checkpoint record,
//! release) must carry it. A paused pserver whose slot was released and claimed again carries
//! an older generation, so whatever it sends afterwards is refused.
//!
//! The generation is public (`ListPServers` shows it to trainers), so it does not prove who
//! sends a request. Each claim also carries a [`SlotSecret`] the claimer drew and told nobody;
//! the state keeps it beside the holder, and heartbeats and checkpoint records must present it
//! (the service checks it against this state before it proposes anything). Releases need none:
//! only the leader proposes them, when a lease runs out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::response::Response;
use client::SlotSecret;

/// The most pservers a job may ask for.
pub const PSERVER_COUNT_MAX: u32 = 1024;
/// The longest pserver address accepted.
pub const PSERVER_ADDR_BYTES_MAX: usize = 256;
/// The longest checkpoint path accepted.
pub const CHECKPOINT_PATH_BYTES_MAX: usize = 4096;

pub use client::CheckpointMeta;

/// Who holds a slot, and under which generation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SlotHolder {
    pub addr: String,
    /// Unique among all claims ever granted; never 0.
    pub generation: u64,
}

/// Which address holds each slot, how many slots there are, and each slot's latest checkpoint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct PServerSlots {
    /// Fixed by the first claim; `None` before it.
    pub(crate) desired: Option<u32>,
    /// Slot index to its holder; an address holds at most one slot.
    pub(crate) holders: BTreeMap<u32, SlotHolder>,
    /// Kept when the holder leaves: the replacement restores from it.
    pub(crate) checkpoints: BTreeMap<u32, CheckpointMeta>,
    /// The generation the next claim gets; only grows, so a generation is never reused.
    pub(crate) next_generation: u64,
    /// Bumped by every change of a holder (claim or release): what pserver watchers poll.
    pub(crate) version: u64,
    /// Slot index to the secret its current holder's claim carried. A holder without one
    /// claimed through an older build: nothing it sends is accepted, so it exits and its slot
    /// goes to a pserver of this build when its lease runs out.
    pub(crate) secrets: BTreeMap<u32, SlotSecret>,
}

impl Default for PServerSlots {
    fn default() -> Self {
        Self {
            desired: None,
            holders: BTreeMap::new(),
            checkpoints: BTreeMap::new(),
            next_generation: 1,
            version: 0,
            secrets: BTreeMap::new(),
        }
    }
}

impl PServerSlots {
    /// Gives `addr` the lowest free slot below `desired`, or the one it already holds, under a
    /// new generation: a claim is a new incarnation of the holder (a pserver restarted on the
    /// same address), and the old one must be fenced off. A client's retry of the same claim
    /// is answered from its session, so it does not bump the generation again.
    pub(crate) fn claim(
        &mut self,
        addr: &str,
        desired: u32,
        secret: Option<SlotSecret>,
    ) -> Response {
        if let Some(reason) = self.claim_error(addr, desired) {
            return Response::Rejected { reason };
        }
        self.desired = Some(desired);
        let held = self.holders.iter().find(|(_, holder)| holder.addr == addr);
        let slot = match held {
            Some((slot, _)) => *slot,
            None => match (0..desired).find(|slot| !self.holders.contains_key(slot)) {
                Some(free) => free,
                None => return Response::SlotsFull { desired },
            },
        };
        let generation = self.next_generation;
        // A generation fences every earlier holder off only if it is above all of theirs.
        assert!(
            self.holders.values().all(|holder| holder.generation < generation),
            "a slot generation only grows: {generation} is not above every holder's"
        );
        self.next_generation += 1;
        self.version += 1;
        self.holders.insert(slot, SlotHolder { addr: addr.to_string(), generation });
        match secret {
            Some(secret) => self.secrets.insert(slot, secret),
            None => self.secrets.remove(&slot),
        };
        Response::SlotClaimed { slot, generation, checkpoint: self.checkpoints.get(&slot).cloned() }
    }

    fn claim_error(&self, addr: &str, desired: u32) -> Option<String> {
        if let Err(reason) = check_addr(addr) {
            return Some(reason);
        }
        if desired == 0 || desired > PSERVER_COUNT_MAX {
            return Some(format!("desired pservers must be 1 to {PSERVER_COUNT_MAX}"));
        }
        match self.desired {
            Some(fixed) if fixed != desired => {
                Some(format!("the job has {fixed} pserver slots; a claim asked for {desired}"))
            }
            _ => None,
        }
    }

    /// A replayed claim gets its slot's latest checkpoint (sessions keep claims without it).
    pub(crate) fn refill_checkpoint(&self, response: Response) -> Response {
        match response {
            Response::SlotClaimed { slot, generation, .. } => Response::SlotClaimed {
                slot,
                generation,
                checkpoint: self.checkpoints.get(&slot).cloned(),
            },
            other => other,
        }
    }

    /// Whether `slot` is held under `generation`.
    pub(crate) fn holds(&self, slot: u32, generation: u64) -> bool {
        self.holders.get(&slot).is_some_and(|holder| holder.generation == generation)
    }

    /// Whether `slot` is held under `generation` by the claimer that drew `secret`.
    pub(crate) fn holds_with_secret(&self, slot: u32, generation: u64, secret: SlotSecret) -> bool {
        self.holds(slot, generation)
            && self.secrets.get(&slot).is_some_and(|kept| kept.matches(secret))
    }

    /// Frees `slot` if it is held under `generation`.
    pub(crate) fn release(&mut self, slot: u32, generation: u64) -> Response {
        if !self.holds(slot, generation) {
            return Response::SlotNotHeld;
        }
        self.holders.remove(&slot);
        self.secrets.remove(&slot);
        self.version += 1;
        Response::Accepted
    }

    /// `slot` restores from `meta` from now on (a restore of a progress checkpoint with
    /// the model): its holder's later records must be newer than `meta` to replace it.
    pub(crate) fn restore_from(&mut self, slot: u32, meta: CheckpointMeta) {
        self.checkpoints.insert(slot, meta);
    }

    /// Records a checkpoint for `slot` from its holder of `generation`, unless the slot
    /// already has one at the same or a higher step (a delayed or repeated report must not
    /// roll the slot back: answered `Stale`). Anyone else is answered `SlotNotHeld`. A path
    /// that is not the file the checkpointer names for (slot, step, generation) is rejected:
    /// a replacement could never restore from it.
    pub(crate) fn record_checkpoint(
        &mut self,
        slot: u32,
        generation: u64,
        meta: &CheckpointMeta,
    ) -> Response {
        if let Err(reason) = check_checkpoint_path(slot, generation, meta) {
            return Response::Rejected { reason };
        }
        if !self.holds(slot, generation) {
            return Response::SlotNotHeld;
        }
        match self.checkpoints.get(&slot) {
            Some(latest) if latest.step >= meta.step => Response::Stale,
            _ => {
                self.checkpoints.insert(slot, meta.clone());
                Response::Accepted
            }
        }
    }
}

/// A checkpoint path is at most [`CHECKPOINT_PATH_BYTES_MAX`] bytes, has no `..` component,
/// and ends in the file name the checkpointer gives (slot, step, generation), so the record
/// says exactly which file a replacement restores and that file's step is the recorded one.
pub fn check_checkpoint_path(
    slot: u32,
    generation: u64,
    meta: &CheckpointMeta,
) -> Result<(), String> {
    let path = meta.path.as_str();
    if path.is_empty() || path.len() > CHECKPOINT_PATH_BYTES_MAX {
        return Err(format!("checkpoint path must be 1 to {CHECKPOINT_PATH_BYTES_MAX} bytes"));
    }
    let expected = storage::checkpoint::file_name(slot, meta.step, generation);
    let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
    if name != expected || parent.split('/').any(|part| part == "..") {
        return Err(format!(
            "checkpoint path {path:?} is not a file named {expected:?} for slot {slot} at step {} \
             under generation {generation} (no \"..\" allowed)",
            meta.step
        ));
    }
    Ok(())
}

/// A pserver address is `host:port`: a non-empty host without spaces and a port number, at
/// most [`PSERVER_ADDR_BYTES_MAX`] bytes. Trainers dial it, so a malformed one would only
/// surface later, on every trainer.
pub fn check_addr(addr: &str) -> Result<(), String> {
    if addr.is_empty() || addr.len() > PSERVER_ADDR_BYTES_MAX {
        return Err(format!("pserver address must be 1 to {PSERVER_ADDR_BYTES_MAX} bytes"));
    }
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(format!("pserver address {addr:?} is not host:port"));
    };
    let host = host.strip_prefix('[').and_then(|host| host.strip_suffix(']')).unwrap_or(host);
    let host_ok = !host.is_empty() && !host.chars().any(|c| c.is_whitespace() || c == '/');
    let port_ok = port.parse::<u16>().is_ok_and(|port| port != 0);
    if !host_ok || !port_ok {
        return Err(format!("pserver address {addr:?} is not host:port with a port of 1-65535"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_addr, check_checkpoint_path, CheckpointMeta};

    /// Only the checkpointer's own name for (slot, step, generation) is a recordable path, in
    /// any directory without `..`; `/nonexistent`, another step or slot, `..` are refused.
    #[test]
    fn checkpoint_paths_follow_the_slot_naming() {
        let name = storage::checkpoint::file_name(1, 7, 3);
        let cases = [
            (format!("/ckpt/{name}"), 7, true),
            (name.clone(), 7, true),
            (format!("ckpt/sub/{name}"), 7, true),
            ("/nonexistent".to_string(), 1 << 62, false),
            (format!("/ckpt/{name}"), 8, false),
            (format!("/ckpt/../etc/{name}"), 7, false),
            (format!("/ckpt/{name}/"), 7, false),
            (storage::checkpoint::file_name(2, 7, 3), 7, false),
            (storage::checkpoint::file_name(1, 7, 4), 7, false),
            (String::new(), 7, false),
        ];
        for (path, step, valid) in cases {
            let meta = CheckpointMeta { path: path.clone(), step, crc32: 0, created_ms: 0 };
            assert_eq!(check_checkpoint_path(1, 3, &meta).is_ok(), valid, "{path:?} at {step}");
        }
    }

    /// Addresses are host:port with a real port; anything else is refused with a reason.
    #[test]
    fn addresses_are_host_and_port() {
        let cases = [
            ("127.0.0.1:7101", true),
            ("ps-0.pservers.default.svc:7101", true),
            ("[::1]:7101", true),
            ("", false),
            ("no-port", false),
            ("host:", false),
            (":7101", false),
            ("host:0", false),
            ("host:70000", false),
            ("two words:1", false),
            ("http://host:1", false),
        ];
        for (addr, valid) in cases {
            assert_eq!(check_addr(addr).is_ok(), valid, "{addr:?}");
        }
    }
}
