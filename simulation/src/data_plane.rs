//! A job's data plane in the simulation: which simulated pserver serves each slot, through the
//! production service (`pserver::service::PServerRpc`: the lease and generation fence, the
//! model-restore check, the shard's update) without the gRPC around it, and the trainers'
//! pulls and pushes through it with the production client's basis rule
//! (`client::pserver::ModelBasis`: the lowest restore a whole pull met).
//!
//! Beside what production sees, each served shard carries the restore the simulation loaded it
//! for (`loaded_for`: the claim's, or the reload's), and every push lands in the history with
//! the restore its pull's values came from and, when applied, the one of the shard it changed:
//! the restore-fencing checker judges from those alone that no push computed before a restore
//! is applied to the restored model.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use client::pserver::f32_bytes;
use client::pserver::layout::{JobLayout, ParamSpec};
use client::pserver::placement::BlockId;
use client::pserver::refusal::refusal_of;
use client::pserver::ModelBasis;
use optimizer::{OptimizerConfig, OptimizerKind};
use proto::pserver as pb;
use pserver::block_state::BlockState;
use pserver::service::PServerRpc;
use pserver::shard::Shard;

use crate::history::{History, PushEvent};
use crate::trace::Trace;

/// Elements of the simulated model's one parameter, and of a block (so a slot holds a few).
const MODEL_ELEMENTS: u64 = 24;
const BLOCK_ELEMENTS: u32 = 4;

/// The simulated pserver that serves a slot now.
#[derive(Clone)]
pub struct ServedSlot {
    pub pserver: u64,
    pub generation: u64,
    pub rpc: PServerRpc,
    /// The model restore the simulation loaded the serving shard for (ground truth).
    pub loaded_for: Arc<AtomicU64>,
}

/// What a trainer's last whole pull read: each slot's generation, and the oldest restore its
/// values came from (ground truth).
pub struct Pulled {
    generations: Vec<(u32, u64)>,
    computed_on: u64,
}

/// One job's data plane.
pub struct SimDataPlane {
    job: String,
    layout: JobLayout,
    served: Mutex<BTreeMap<u32, ServedSlot>>,
    history: History,
    trace: Trace,
}

impl SimDataPlane {
    /// The data plane of `job`, whose model is spread over `slot_count` slots.
    pub fn new(job: &str, slot_count: u32, (history, trace): (History, Trace)) -> Self {
        let params = vec![ParamSpec { name: "w".into(), shape: vec![MODEL_ELEMENTS] }];
        let optimizer = OptimizerConfig { learning_rate: 0.1, kind: OptimizerKind::Sgd };
        let layout = JobLayout { params, block_elements: BLOCK_ELEMENTS, slot_count, optimizer };
        let served = Mutex::default();
        Self { job: job.to_string(), layout, served, history, trace }
    }

    fn served(&self) -> MutexGuard<'_, BTreeMap<u32, ServedSlot>> {
        self.served.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A shard of `slot` as loaded for model restore `restore` (the simulation keeps no
    /// files: its values are fresh, which no check here reads).
    pub fn shard(&self, slot: u32, restore: u64) -> anyhow::Result<Shard> {
        let optimizer = &self.layout.optimizer;
        let blocks = self.layout.blocks_of_slot(slot).into_iter();
        let blocks =
            blocks.map(|(id, length)| (id, BlockState::fresh(vec![0.5; length], optimizer)));
        let shard = Shard::new(self.layout.clone(), slot, 0, blocks.collect())?;
        Ok(shard.of_model_restore(restore))
    }

    /// `slot` is served by `served` from now on.
    pub fn serve(&self, slot: u32, served: ServedSlot) {
        self.served().insert(slot, served);
    }

    /// `pserver` no longer serves `slot` (it crashed or lost it).
    pub fn stop(&self, slot: u32, pserver: u64) {
        let mut served = self.served();
        if served.get(&slot).is_some_and(|served| served.pserver == pserver) {
            served.remove(&slot);
        }
    }

    /// Pulls every slot, as `PServerClient` does, and sets `basis` from the restores the
    /// pull was answered with. `None` while a slot is not served or refuses the pull.
    pub fn pull(&self, basis: &ModelBasis) -> Option<Pulled> {
        let served: Vec<(u32, ServedSlot)> =
            self.served().iter().map(|(slot, served)| (*slot, served.clone())).collect();
        if served.len() != self.layout.slot_count as usize {
            return None;
        }
        let mut restores = Vec::with_capacity(served.len());
        for (slot, served) in &served {
            let fence =
                pb::Fence { slot: *slot, generation: served.generation, model_restore: None };
            let (_, stamp) = served.rpc.pull_blocks(Some(fence), &[]).ok()?;
            restores.push(stamp.model_restore);
        }
        basis.pulled(restores);
        let truth = served.iter().map(|(_, served)| served.loaded_for.load(Ordering::SeqCst));
        Some(Pulled {
            generations: served.iter().map(|(slot, served)| (*slot, served.generation)).collect(),
            computed_on: truth.min().unwrap_or(0),
        })
    }

    /// Pushes a gradient computed on `pulled` to each slot's holder now, naming `basis`, and
    /// records each push in the history (`trainer`'s).
    pub async fn push(&self, pulled: &Pulled, basis: &ModelBasis, trainer: u64) {
        for &(slot, generation) in &pulled.generations {
            let Some(served) = self.served().get(&slot).cloned() else { continue };
            let fence = pb::Fence { slot, generation, model_restore: basis.get() };
            let pushed = served.rpc.push_blocks(Some(fence), self.gradient(slot)).await;
            // Read with no await since the push applied: the shard it changed.
            let landed_on = pushed.as_ref().ok().map(|_| served.loaded_for.load(Ordering::SeqCst));
            if let Err(status) = &pushed {
                self.trace.tally(match refusal_of(status) {
                    Some("model-restored") => "push refused: model restored",
                    _ => "push refused: fenced off",
                });
            }
            self.history.push_event(PushEvent {
                job: self.job.clone(),
                trainer,
                slot,
                generation,
                computed_on: pulled.computed_on,
                landed_on,
            });
        }
    }

    /// A small gradient for each of `slot`'s blocks.
    fn gradient(&self, slot: u32) -> Vec<(BlockId, Bytes)> {
        let blocks = self.layout.blocks_of_slot(slot).into_iter();
        blocks
            .map(|(id, length)| (id, Bytes::from(f32_bytes::encode(&vec![0.01; length]))))
            .collect()
    }
}
