//! Pserver slots as snapshots before claim secrets wrote them (layouts 1 and 2), and their
//! conversion: the holders keep no secret, so none of them is confirmed again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::pserver_slots::{CheckpointMeta, PServerSlots, SlotHolder};

/// Pserver slots before claims carried secrets (field for field). Their holders keep no
/// secret, so none of them is confirmed again: each exits, its lease runs out, and a pserver
/// of this build claims the slot (restoring the kept checkpoint).
#[derive(Serialize, Deserialize)]
pub(super) struct SlotsWithoutSecrets {
    pub(super) desired: Option<u32>,
    pub(super) holders: BTreeMap<u32, SlotHolder>,
    pub(super) checkpoints: BTreeMap<u32, CheckpointMeta>,
    pub(super) next_generation: u64,
    pub(super) version: u64,
}

impl SlotsWithoutSecrets {
    /// No slots held, as a new state has them.
    #[cfg(test)]
    pub(super) fn none() -> Self {
        let (holders, checkpoints) = (BTreeMap::new(), BTreeMap::new());
        Self { desired: None, holders, checkpoints, next_generation: 1, version: 0 }
    }
}

impl From<SlotsWithoutSecrets> for PServerSlots {
    fn from(old: SlotsWithoutSecrets) -> Self {
        let SlotsWithoutSecrets { desired, holders, checkpoints, next_generation, version } = old;
        let secrets = BTreeMap::new();
        PServerSlots { desired, holders, checkpoints, next_generation, version, secrets }
    }
}
