//! The pserver slots (`/ps/<index>` and `/ps_desired` in the seeds) and their checkpoints.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::response::Response;

/// The most pservers a job may ask for.
pub const PSERVER_COUNT_MAX: u32 = 1024;
/// The longest pserver address accepted.
pub const PSERVER_ADDR_BYTES_MAX: usize = 256;
/// The longest checkpoint path accepted.
pub const CHECKPOINT_PATH_BYTES_MAX: usize = 4096;

/// Where a slot's latest checkpoint file is and how to check it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct CheckpointMeta {
    /// The checkpoint file, as the pserver wrote it.
    pub path: String,
    /// The pserver's update step at the checkpoint; a higher step is newer.
    pub step: u64,
    /// crc32 of the file, checked before restoring.
    pub crc32: u32,
    /// When the pserver wrote it (its clock), for people reading status.
    pub created_ms: u64,
}

/// Which address holds each slot, how many slots there are, and each slot's latest checkpoint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub(crate) struct PServerSlots {
    /// Fixed by the first claim; `None` before it.
    pub(crate) desired: Option<u32>,
    /// Slot index to the address holding it; an address holds at most one slot.
    pub(crate) holders: BTreeMap<u32, String>,
    /// Kept when the holder leaves: the replacement restores from it.
    pub(crate) checkpoints: BTreeMap<u32, CheckpointMeta>,
}

impl PServerSlots {
    /// Gives `addr` the lowest free slot below `desired`, or the one it already holds.
    pub(crate) fn claim(&mut self, addr: &str, desired: u32) -> Response {
        if let Some(reason) = self.claim_error(addr, desired) {
            return Response::Rejected { reason };
        }
        self.desired = Some(desired);
        let held = self.holders.iter().find(|(_, holder)| holder.as_str() == addr);
        let index = match held {
            Some((index, _)) => *index,
            None => {
                let Some(free) = (0..desired).find(|index| !self.holders.contains_key(index))
                else {
                    return Response::SlotsFull { desired };
                };
                self.holders.insert(free, addr.to_string());
                free
            }
        };
        Response::SlotClaimed { index, checkpoint: self.checkpoints.get(&index).cloned() }
    }

    fn claim_error(&self, addr: &str, desired: u32) -> Option<String> {
        if addr.is_empty() || addr.len() > PSERVER_ADDR_BYTES_MAX {
            return Some(format!("pserver address must be 1 to {PSERVER_ADDR_BYTES_MAX} bytes"));
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

    /// Frees slot `index` if `addr` holds it.
    pub(crate) fn release(&mut self, index: u32, addr: &str) -> Response {
        match self.holders.get(&index) {
            Some(holder) if holder == addr => {
                self.holders.remove(&index);
                Response::Accepted
            }
            _ => Response::SlotNotHeld,
        }
    }

    /// Records a checkpoint for `index` unless the slot already has one at the same or a
    /// higher step (a delayed or repeated report must not roll the slot back).
    pub(crate) fn record_checkpoint(&mut self, index: u32, meta: &CheckpointMeta) -> Response {
        let Some(desired) = self.desired else {
            return Response::Rejected { reason: "no pserver slot was claimed yet".to_string() };
        };
        if index >= desired {
            return Response::Rejected {
                reason: format!("slot {index} does not exist; the job has {desired} slots"),
            };
        }
        if meta.path.len() > CHECKPOINT_PATH_BYTES_MAX {
            return Response::Rejected { reason: "checkpoint path is too long".to_string() };
        }
        match self.checkpoints.get(&index) {
            Some(latest) if latest.step >= meta.step => Response::Stale,
            _ => {
                self.checkpoints.insert(index, meta.clone());
                Response::Accepted
            }
        }
    }
}
