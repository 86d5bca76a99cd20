//! `LeaderDuties`: lease tables for trainers and pservers, and the loop that acts on them while
//! this node leads.

use super::lease_table::LeaseTable;
use crate::replicated_state::ReplicatedState;
use crate::service::propose;
use crate::state::Command;
use consensus::ConsensusNode;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// How often the leader looks for lost holders and expired tasks.
pub(crate) const DUTY_TICK_MS: u64 = 100;

pub(crate) struct LeaderDuties {
    trainer_lease: Duration,
    pserver_lease: Duration,
    trainers: Mutex<LeaseTable<u64>>,
    pservers: Mutex<LeaseTable<u32>>,
}

impl LeaderDuties {
    pub(crate) fn new(trainer_lease: Duration, pserver_lease: Duration) -> Self {
        Self {
            trainer_lease,
            pserver_lease,
            trainers: Mutex::new(LeaseTable::new(trainer_lease)),
            pservers: Mutex::new(LeaseTable::new(pserver_lease)),
        }
    }

    pub(crate) fn trainer_lease_ms(&self) -> u64 {
        self.trainer_lease.as_millis() as u64
    }

    pub(crate) fn pserver_lease_ms(&self) -> u64 {
        self.pserver_lease.as_millis() as u64
    }

    pub(crate) fn trainer_alive(&self, trainer: u64) {
        lock(&self.trainers).grant(trainer, Instant::now());
    }

    pub(crate) fn pserver_alive(&self, index: u32) {
        lock(&self.pservers).grant(index, Instant::now());
    }

    /// Forgets all leases: the next time this node leads, everyone starts with a fresh lease.
    fn step_down(&self) {
        lock(&self.trainers).clear();
        lock(&self.pservers).clear();
    }

    /// One round of duties on the leader.
    async fn tick(&self, node: &ConsensusNode<ReplicatedState>) {
        let (now, now_ms) = (Instant::now(), crate::clock::now_ms());
        let (trainers, (_, slots), expired) = node
            .read(|state| (state.trainer_ids(), state.pserver_slots(), state.has_expired(now_ms)));
        let lost = {
            let mut table = lock(&self.trainers);
            table.sync(trainers, now);
            table.expired(now)
        };
        for trainer in lost {
            tracing::warn!(trainer, "trainer missed its lease; returning its tasks");
            report(node, Command::TrainerLost { trainer }).await;
        }
        let dead = {
            let mut table = lock(&self.pservers);
            table.sync(slots.iter().map(|(index, _)| *index), now);
            table.expired(now)
        };
        for (index, addr) in slots.into_iter().filter(|(index, _)| dead.contains(index)) {
            tracing::warn!(slot = index, %addr, "pserver missed its lease; freeing its slot");
            report(node, Command::ReleasePServerSlot { index, addr }).await;
        }
        if expired {
            report(node, Command::ExpireTasks).await;
        }
    }
}

/// Runs the duties until `stop` turns true.
pub(crate) async fn run_duties(
    node: ConsensusNode<ReplicatedState>,
    duties: std::sync::Arc<LeaderDuties>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(Duration::from_millis(DUTY_TICK_MS));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        if node.is_leader() {
            duties.tick(&node).await;
        } else {
            duties.step_down();
        }
    }
}

/// Proposes a leader decision. A failure is logged here, where it is handled: the next tick
/// sees the same state and tries again.
async fn report(node: &ConsensusNode<ReplicatedState>, command: Command) {
    if let Err(status) = propose(node, None, command).await {
        tracing::info!(error = %status.message(), "leader duty not committed; will retry");
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The tables stay consistent whatever panicked while holding them: every method leaves
    // them whole.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
