//! A simulated pserver process of one job, running the production slot keeping: `pserver::slot_keeper`
//! claims a slot and heartbeats it, `pserver::held_slot::HeldSlot` judges the lease (on a
//! clock of the pserver's own, skewed like the masters'), and `pserver::checkpointer::record`
//! records a checkpoint now and then under the claim's generation and secret, at a path in the
//! directory its claim's job incarnation names (no file is written). Its slot's shard is a
//! production `Shard` served through the production service on the job's data plane
//! (`data_plane.rs`), loaded for the claim's model restore, and reloaded when a heartbeat asks
//! (`pserver_asks.rs`). Only the process around them is simulated: it
//! watches its lease as the production serving loop does, sometimes crashes and comes back
//! (claiming again, on a fresh clock), and starts over when the master gave its slot to
//! another generation, as a production pserver exits to be restarted. What it is told of its
//! slot, and its checkpoint records, reach the checkers through `RecordedMaster`.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use client::{CheckpointRecorded, SlotLease};
use pserver::checkpointer;
use pserver::held_slot::{FenceError, HeldSlot};
use pserver::job_dir::job_checkpoint_dir;
use pserver::service::PServerRpc;
use pserver::shard_cell::ShardCell;
use pserver::slot_keeper;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::client::ClientContext;
use crate::clock::{ClockSkew, SimClock};
use crate::config::SimulationConfig;
use crate::data_plane::{ServedSlot, SimDataPlane};
use crate::history::{SlotEvent, SlotEventKind};
use crate::job::SimJob;
use crate::pserver_asks::AskFollower;
use crate::recorded_master::RecordedMaster;
use crate::rng::SimRng;

/// Ids of pservers in the history start here.
pub const PSERVER_ID_BASE: u64 = 2_000;
/// How often the process looks at its lease, as the production serving loop does.
const LEASE_CHECK_MS: u64 = 50;
/// Chance per lease check, in thousandths, that the pserver crashes, and how long it stays
/// down.
const CRASH_PER_MILLE: u64 = 4;
const DOWN_MS: (u64, u64) = (100, 3_000);
/// Every this many lease checks, a checkpoint.
const CHECKPOINT_EVERY: u64 = 40;
/// After a claim failed with an error (not a wait for a free slot), before the next.
const RETRY_MS: (u64, u64) = (50, 200);
/// The random streams of the pservers' claim secrets and clocks, far from every other
/// component's.
const SECRET_STREAM_BASE: u64 = 1 << 40;
const CLOCK_STREAM_BASE: u64 = 1 << 41;

/// One pserver process slot (it restarts under the same address).
pub struct SimPServer {
    id: u64,
    addr: String,
    rng: SimRng,
    /// Draws each incarnation's clock skew.
    clocks: SimRng,
    master: Arc<RecordedMaster>,
    context: ClientContext,
    slots: u32,
    plane: Arc<SimDataPlane>,
}

/// How a served slot ended.
enum Ended {
    Crashed,
    Lost,
}

impl SimPServer {
    /// Pserver number `index` of the run, one of `job`'s, serving on `plane`.
    pub fn new(
        index: u64,
        (job, plane): (&SimJob, &Arc<SimDataPlane>),
        config: &SimulationConfig,
        context: &ClientContext,
    ) -> anyhow::Result<Self> {
        let context = context.in_job(job, config);
        let id = PSERVER_ID_BASE + index;
        let client = context.master_client(config, config.seed ^ (0x9e55 + index))?;
        let secrets = SimRng::derive(config.seed, SECRET_STREAM_BASE + index);
        let master = Arc::new(RecordedMaster::new(id, client, context.clone(), secrets));
        Ok(Self {
            id,
            addr: format!("ps-{index}:9000"),
            rng: SimRng::derive(config.seed, 50 + index),
            clocks: SimRng::derive(config.seed, CLOCK_STREAM_BASE + index),
            master,
            context,
            slots: job.pserver_slots,
            plane: plane.clone(),
        })
    }

    /// Claims and serves until the run ends, or its job was cancelled (then it exits, as a
    /// production pserver does).
    pub async fn run(mut self) {
        loop {
            let clock = self.start_clock();
            // Never sent: a simulated pserver ends by crashing, or with the run.
            let (_stop, mut stopped) = watch::channel(false);
            let claim =
                slot_keeper::claim(&*self.master, clock, &self.addr, self.slots, &mut stopped);
            match claim.await {
                Ok(Some((held, lease))) => {
                    if let Ended::Crashed = self.serve(held, lease, stopped).await {
                        self.pause(DOWN_MS).await;
                    }
                }
                // The stop signal is never sent: the job was cancelled.
                Ok(None) => {
                    self.context.trace.record(format!("pserver {} exits: job cancelled", self.id));
                    return;
                }
                Err(error) => {
                    self.context
                        .trace
                        .record(format!("pserver {} claim failed: {error:#}", self.id));
                    self.pause(RETRY_MS).await;
                }
            }
        }
    }

    /// A fresh process's clock, skewed like a master's.
    fn start_clock(&mut self) -> Arc<SimClock> {
        let clock = SimClock::new(Instant::now());
        let skew = ClockSkew::draw(&mut self.clocks);
        clock.set_skew(skew);
        if skew != ClockSkew::default() {
            self.context.trace.tally("skewed pserver clock");
        }
        self.context.trace.record(format!("pserver {} starts, clock {skew:?}", self.id));
        Arc::new(clock)
    }

    /// Keeps `lease` with the production heartbeat loop and watches it until the pserver
    /// crashes or the slot is lost; checkpoints every `CHECKPOINT_EVERY` checks.
    async fn serve(
        &mut self,
        held: Arc<HeldSlot>,
        lease: SlotLease,
        stopped: watch::Receiver<bool>,
    ) -> Ended {
        let (master, addr) = (self.master.clone(), self.addr.clone());
        let keeper =
            tokio::spawn(slot_keeper::keep(master, held.clone(), lease.clone(), addr, stopped));
        let follower = match self.serve_shard(&held, &lease) {
            Ok(follower) => tokio::spawn(follower.run()),
            Err(error) => {
                self.context.trace.record(format!("pserver {} shard: {error:#}", self.id));
                keeper.abort();
                return Ended::Crashed;
            }
        };
        // The shard restores at the recorded step.
        let mut step = lease.checkpoint.as_ref().map_or(0, |meta| meta.step);
        let mut serving = true;
        let mut checks: u64 = 0;
        let ended = loop {
            checks += 1;
            tokio::time::sleep(Duration::from_millis(LEASE_CHECK_MS)).await;
            if self.rng.range(0, 1_000) < CRASH_PER_MILLE {
                self.context.trace.record(format!("pserver {} crashes", self.id));
                break Ended::Crashed;
            }
            match held.check() {
                Err(FenceError::LeaseLost { .. }) => {
                    self.context.trace.record(format!("pserver {} lost its slot", self.id));
                    break Ended::Lost;
                }
                checked => self.saw_lease(&mut serving, checked.is_ok(), &lease),
            }
            if checks.is_multiple_of(CHECKPOINT_EVERY) {
                step = self.checkpoint(&held, &lease, step).await;
            }
        };
        // A process that ends stops its heartbeats and its asks mid-call, whatever they were
        // doing, and serves no more.
        keeper.abort();
        follower.abort();
        self.plane.stop(lease.slot, self.id);
        ended
    }

    /// Serves `lease`'s slot on the data plane with a shard loaded for the claim's model
    /// restore; what follows the heartbeats' asks about it.
    fn serve_shard(&self, held: &Arc<HeldSlot>, lease: &SlotLease) -> anyhow::Result<AskFollower> {
        let shard = self.plane.shard(lease.slot, lease.model_restore)?;
        let cell = Arc::new(ShardCell::restored(lease.slot, shard));
        let rpc = PServerRpc::new(cell.clone(), held.clone(), Arc::new(AtomicU64::new(0)));
        let loaded_for = Arc::new(AtomicU64::new(lease.model_restore));
        let (pserver, generation) = (self.id, lease.generation);
        let served = ServedSlot { pserver, generation, rpc, loaded_for: loaded_for.clone() };
        self.plane.serve(lease.slot, served);
        Ok(AskFollower {
            pserver,
            master: self.master.clone(),
            context: self.context.clone(),
            plane: self.plane.clone(),
            held: held.clone(),
            lease: lease.clone(),
            cell,
            loaded_for,
            tagged: 0,
        })
    }

    /// Tells the slot checker the pserver serves `lease`'s slot now, if it does, and traces
    /// when it stops (its lease unconfirmed) and when it serves again.
    fn saw_lease(&self, serving: &mut bool, now_serving: bool, lease: &SlotLease) {
        if now_serving {
            let now_ms = self.context.trace.now_ms();
            self.context.history.slot_event(SlotEvent {
                job: self.context.job.clone(),
                slot: lease.slot,
                generation: lease.generation,
                pserver: self.id,
                invoked_ms: now_ms,
                answered_ms: now_ms,
                kind: SlotEventKind::Serving,
            });
        }
        if *serving != now_serving {
            let what = if now_serving { "serves again" } else { "stops serving" };
            self.context.trace.record(format!("pserver {} {what}", self.id));
            *serving = now_serving;
        }
    }

    /// The shard moved one step past `step`; records its checkpoint through the production
    /// record path. The step to go on from.
    async fn checkpoint(&mut self, held: &HeldSlot, lease: &SlotLease, step: u64) -> u64 {
        let step = step + 1;
        held.saw_step(step);
        let name = storage::checkpoint::file_name(lease.slot, step, lease.generation);
        // In the directory the claim's incarnation id names, as a production pserver keeps it.
        let dir = job_checkpoint_dir(Path::new("ckpt"), lease.job_id, &self.context.job);
        let path = dir.join(name).to_string_lossy().into_owned();
        match checkpointer::record(&*self.master, held, lease, path, step, 0).await {
            Ok(CheckpointRecorded::Recorded) => step,
            // The master has a newer one: the shard moves past it, as the production one does.
            Ok(CheckpointRecorded::Stale { recorded_step }) => step.max(recorded_step),
            Err(error) => {
                let id = self.id;
                self.context.trace.record(format!("pserver {id} checkpoint {step}: {error:#}"));
                step
            }
        }
    }

    async fn pause(&mut self, range: (u64, u64)) {
        tokio::time::sleep(Duration::from_millis(self.rng.range(range.0, range.1))).await;
    }
}
