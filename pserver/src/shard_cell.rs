//! `ShardCell`: a slot's shard through its life: empty, being initialized by one trainer,
//! serving. The first initializer wins; another is told to wait, unless the one at work has
//! sent nothing for [`INIT_IDLE_MS_MAX`] (it died): then the newcomer starts over.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::block_state::BlockState;
use crate::f32_bytes;
use crate::layout::JobLayout;
use crate::placement::{slot_of, BlockId};
use crate::shard::Shard;
use crate::shard_error::ShardError;

/// An initializer silent this long is taken to have died.
pub const INIT_IDLE_MS_MAX: u64 = 30_000;

/// What `InitParams` tells its caller.
#[derive(Debug, PartialEq)]
pub enum InitAnswer {
    /// The caller initializes: send the rest, then finish.
    Accepted,
    /// Another initializer is at work with this layout: wait for the shard to serve.
    ByAnother(JobLayout),
    /// The shard serves already, with this layout.
    Initialized(JobLayout),
}

/// The phase the shard is in.
#[derive(Debug)]
enum Phase {
    Empty,
    Initializing(Initializing),
    Ready(Arc<Shard>),
}

#[derive(Debug)]
struct Initializing {
    initializer: u64,
    layout: JobLayout,
    expected: BTreeMap<BlockId, usize>,
    received: BTreeMap<BlockId, Vec<f32>>,
    last_activity: Instant,
}

/// One slot's shard and its phase.
#[derive(Debug)]
pub struct ShardCell {
    slot: u32,
    slot_count: u32,
    /// The job's model restore a shard an initializer makes here is of (the claim's).
    model_restore: u64,
    phase: Mutex<Phase>,
}

impl ShardCell {
    /// An empty cell for `slot` of a job with `slot_count` slots.
    pub fn empty(slot: u32, slot_count: u32) -> Self {
        assert!(slot < slot_count, "slot {slot} of {slot_count}");
        Self { slot, slot_count, model_restore: 0, phase: Mutex::new(Phase::Empty) }
    }

    /// This empty cell for a job whose model restores asked number `model_restore`.
    pub fn of_model_restore(mut self, model_restore: u64) -> Self {
        self.model_restore = model_restore;
        self
    }

    /// A cell that serves a restored shard at once.
    pub fn restored(slot: u32, shard: Shard) -> Self {
        let (slot_count, model_restore) = (shard.layout().slot_count, shard.model_restore());
        let phase = Mutex::new(Phase::Ready(Arc::new(shard)));
        Self { slot, slot_count, model_restore, phase }
    }

    /// Serves `shard` from now on, whatever the phase (a restore with the model reloaded it):
    /// calls that already hold the previous shard finish on it.
    pub fn replace(&self, shard: Shard) {
        *self.lock() = Phase::Ready(Arc::new(shard));
    }

    /// How many slots the job has.
    pub fn slot_count(&self) -> u32 {
        self.slot_count
    }

    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The serving shard, or `NotReady`.
    pub fn ready(&self) -> Result<Arc<Shard>, ShardError> {
        match &*self.lock() {
            Phase::Ready(shard) => Ok(shard.clone()),
            _ => Err(ShardError::NotReady),
        }
    }

    /// The layout, if any, and whether the shard serves: for `Status`.
    pub fn describe(&self) -> (Option<JobLayout>, Option<Arc<Shard>>, bool) {
        match &*self.lock() {
            Phase::Empty => (None, None, false),
            Phase::Initializing(init) => (Some(init.layout.clone()), None, true),
            Phase::Ready(shard) => (Some(shard.layout().clone()), Some(shard.clone()), false),
        }
    }

    /// `InitParams`: takes `blocks` from the winning initializer. The whole request (layout,
    /// this slot's share of it, every block) is checked before the phase changes: a refused
    /// request leaves the shard as it was, so it cannot make the real initializer wait.
    pub fn init(
        &self,
        initializer: u64,
        layout: JobLayout,
        blocks: &[(BlockId, &[u8])],
        now: Instant,
    ) -> Result<InitAnswer, ShardError> {
        layout.validate()?;
        if layout.slot_count != self.slot_count {
            return Err(ShardError::SlotCount { job: layout.slot_count, ours: self.slot_count });
        }
        let mut phase = self.lock();
        match &mut *phase {
            Phase::Ready(shard) => return Ok(InitAnswer::Initialized(shard.layout().clone())),
            Phase::Initializing(init) if init.initializer == initializer => {
                if init.layout != layout {
                    return Err(ShardError::LayoutMismatch("is being initialized with"));
                }
                let decoded = decode_blocks(&init.layout, &init.expected, blocks)?;
                init.received.extend(decoded);
                init.last_activity = now;
                return Ok(InitAnswer::Accepted);
            }
            Phase::Initializing(init) => {
                let idle = now.saturating_duration_since(init.last_activity);
                if idle < Duration::from_millis(INIT_IDLE_MS_MAX) {
                    return Ok(InitAnswer::ByAnother(init.layout.clone()));
                }
            }
            Phase::Empty => {}
        }
        let mut fresh = self.start(initializer, layout, now)?;
        let decoded = decode_blocks(&fresh.layout, &fresh.expected, blocks)?;
        fresh.received.extend(decoded);
        *phase = Phase::Initializing(fresh);
        Ok(InitAnswer::Accepted)
    }

    /// `FinishInit`: the initializer sent everything; the shard starts serving.
    pub fn finish(&self, initializer: u64) -> Result<(), ShardError> {
        let mut phase = self.lock();
        let init = match &mut *phase {
            Phase::Ready(_) => return Ok(()),
            Phase::Empty => return Err(ShardError::NotReady),
            Phase::Initializing(init) => init,
        };
        if init.initializer != initializer {
            return Err(ShardError::NotInitializer {
                caller: initializer,
                current: init.initializer,
            });
        }
        let optimizer = init.layout.optimizer;
        let blocks = std::mem::take(&mut init.received)
            .into_iter()
            .map(|(id, values)| (id, BlockState::fresh(values, &optimizer)))
            .collect();
        match Shard::new(init.layout.clone(), self.slot, 0, blocks) {
            Ok(shard) => {
                *phase = Phase::Ready(Arc::new(shard.of_model_restore(self.model_restore)));
                Ok(())
            }
            Err(error) => {
                // Nothing was lost: the initializer starts over with a fresh offer.
                *phase = Phase::Empty;
                Err(error)
            }
        }
    }

    fn start(
        &self,
        initializer: u64,
        layout: JobLayout,
        now: Instant,
    ) -> Result<Initializing, ShardError> {
        // `init` validated the layout; the walk over this slot's share allocates nothing.
        layout.validate_slot(self.slot)?;
        let expected = layout.blocks_of_slot(self.slot);
        Ok(Initializing {
            initializer,
            layout,
            expected,
            received: BTreeMap::new(),
            last_activity: now,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Phase> {
        // Phase changes are single assignments: a panic elsewhere cannot leave one half-made.
        self.phase.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Decodes initial values, each for a block this slot serves, all finite.
fn decode_blocks(
    layout: &JobLayout,
    expected: &BTreeMap<BlockId, usize>,
    blocks: &[(BlockId, &[u8])],
) -> Result<Vec<(BlockId, Vec<f32>)>, ShardError> {
    let mut decoded = Vec::with_capacity(blocks.len());
    for (id, bytes) in blocks {
        let Some(&length) = expected.get(id) else {
            let slot = slot_of(&id.name, id.index, layout.slot_count);
            return Err(match layout.block_length(id) {
                Some(_) => ShardError::NotOwned { id: id.clone(), slot },
                None => ShardError::UnknownBlock { id: id.clone() },
            });
        };
        let values = f32_bytes::decode_finite(bytes, length)
            .map_err(|error| ShardError::Payload { id: id.clone(), error })?;
        decoded.push((id.clone(), values));
    }
    Ok(decoded)
}
