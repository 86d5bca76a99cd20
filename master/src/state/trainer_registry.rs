//! The registered trainers and the counter that names new ones.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The most trainers registered at once; a registration beyond it is rejected.
pub const TRAINER_COUNT_MAX: usize = 10_000;
/// The longest trainer name accepted.
pub const TRAINER_NAME_BYTES_MAX: usize = 256;

/// Trainers by id. Ids come from a replicated counter, so every replica assigns the same one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub(crate) struct TrainerRegistry {
    /// Id to the name the trainer gave (for status only).
    pub(crate) trainers: BTreeMap<u64, String>,
    /// The id the next registration gets. Starts at 1 so 0 (a protobuf default) is never valid,
    /// and only grows so a lost trainer's id is never reused and its late reports stay fenced.
    pub(crate) next_trainer_id: u64,
}

impl Default for TrainerRegistry {
    fn default() -> Self {
        Self { trainers: BTreeMap::new(), next_trainer_id: 1 }
    }
}

impl TrainerRegistry {
    /// Registers a trainer and returns its id, or why it cannot be registered.
    pub(crate) fn register(&mut self, name: &str) -> Result<u64, String> {
        if name.len() > TRAINER_NAME_BYTES_MAX {
            return Err(format!("trainer name is longer than {TRAINER_NAME_BYTES_MAX} bytes"));
        }
        if self.trainers.len() >= TRAINER_COUNT_MAX {
            return Err(format!("{TRAINER_COUNT_MAX} trainers are already registered"));
        }
        let trainer = self.next_trainer_id;
        self.next_trainer_id += 1;
        self.trainers.insert(trainer, name.to_string());
        Ok(trainer)
    }

    /// Removes a trainer; `false` if it was not registered.
    pub(crate) fn remove(&mut self, trainer: u64) -> bool {
        self.trainers.remove(&trainer).is_some()
    }

    pub(crate) fn contains(&self, trainer: u64) -> bool {
        self.trainers.contains_key(&trainer)
    }
}
