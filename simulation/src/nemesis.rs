//! The fault injector: at each of its turns it ends the faults whose time is up, then draws
//! one fault from the seed or does nothing: crash a node (or every node), restart one, isolate
//! one, or stop one gracefully (SIGTERM: it hands leadership off, then exits), isolate one (sometimes for seconds, with no other fault meanwhile, so the others take several
//! snapshots and it must catch up by installing one), heal, change link faults, pause a node past its election timeout, make a
//! disk slow or stall it; and it crashes nodes in the middle of writing a snapshot. Clock skew
//! is drawn per node incarnation (`cluster`).

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::Cluster;
use crate::disk::DiskFaults;
use crate::network::LinkFaults;
use crate::rng::SimRng;
use crate::trace::Trace;

/// Upper bounds of the link faults the injector sets.
const LOSS_PERCENT_MAX: u64 = 25;
const DUPLICATE_PERCENT_MAX: u64 = 10;
const SLOW_PERCENT_MAX: u64 = 20;
/// A pause lasts this long (well past every election timeout).
const PAUSE_MS: (u64, u64) = (400, 3_000);
/// A long partition holds this long, whatever else is drawn meanwhile.
const LONG_PARTITION_MS: (u64, u64) = (1_500, 4_000);
/// A disk fault lasts this long; a slow disk is this many times slower.
const DISK_FAULT_MS: (u64, u64) = (200, 2_000);
const SLOW_DISK_FACTOR: (u64, u64) = (3, 30);
/// Chance, at each turn, that a node writing a snapshot crashes right then.
const CRASH_MID_SNAPSHOT_PERCENT: u64 = 15;

/// Draws and applies faults, and remembers when the timed ones end.
pub struct Nemesis {
    rng: SimRng,
    /// Whether a drawn crash is a graceful stop (SIGTERM) instead.
    graceful: SimRng,
    graceful_stop_percent: u64,
    trace: Trace,
    resume_at: BTreeMap<u64, u64>,
    disk_restored_at: BTreeMap<u64, u64>,
    partition_held_until: u64,
}

impl Nemesis {
    /// Draws faults from `rng`, and from `graceful` whether a crash is a graceful stop instead
    /// (`graceful_stop_percent` of them).
    pub fn new(rng: SimRng, graceful: (SimRng, u64), trace: Trace) -> Self {
        let (resume_at, disk_restored_at) = (BTreeMap::new(), BTreeMap::new());
        let (graceful, graceful_stop_percent) = graceful;
        let partition_held_until = 0;
        Self {
            rng,
            graceful,
            graceful_stop_percent,
            trace,
            resume_at,
            disk_restored_at,
            partition_held_until,
        }
    }

    /// Takes one turn.
    pub async fn act(&mut self, cluster: &mut Cluster) -> anyhow::Result<()> {
        self.end_due_faults(cluster);
        if self.trace.now_ms() < self.partition_held_until {
            // A held partition plays out alone: the isolated node keeps running and serving
            // its clients while the others move on without it.
            return Ok(());
        }
        self.crash_mid_snapshot(cluster);
        let running: Vec<u64> = cluster.running().iter().map(|node| node.id).collect();
        let crashed = cluster.crashed();
        let leader = cluster.leader().map(|leader| leader.id);
        // Half the faults aimed at a running node hit the leader, whose faults matter most.
        let pick = |rng: &mut SimRng, ids: &[u64]| match leader {
            Some(leader) if ids.contains(&leader) && rng.percent(50) => leader,
            _ => ids[rng.index(ids.len())],
        };
        match self.rng.range(0, 100) {
            0..=39 => {}
            40..=47 if !running.is_empty() => {
                let id = pick(&mut self.rng, &running);
                // Drawn from a stream of its own, so that the faults drawn above stay the same.
                match self.graceful.percent(self.graceful_stop_percent) {
                    true => cluster.stop_gracefully(id).await,
                    false => cluster.crash(id),
                }
            }
            48..=49 => {
                self.trace.record("nemesis crashes every node");
                self.trace.tally("crash every node");
                running.iter().for_each(|id| cluster.crash(*id));
            }
            50..=61 if !crashed.is_empty() => {
                cluster.start_node(pick(&mut self.rng, &crashed)).await?;
            }
            62..=67 if !running.is_empty() => {
                let isolated = pick(&mut self.rng, &running);
                self.isolate(cluster, isolated);
            }
            68..=70 if !running.is_empty() => {
                let isolated = pick(&mut self.rng, &running);
                let hold_ms = self.rng.range(LONG_PARTITION_MS.0, LONG_PARTITION_MS.1);
                self.partition_held_until = self.trace.now_ms() + hold_ms;
                self.trace.record(format!("nemesis holds the next partition for {hold_ms} ms"));
                self.trace.tally("long partition");
                self.isolate(cluster, isolated);
            }
            71..=78 => {
                self.trace.record("nemesis heals the network");
                cluster.network().heal();
                self.resume_at.clear();
            }
            79..=85 => self.set_link_faults(cluster),
            86..=92 if !running.is_empty() => {
                let paused = pick(&mut self.rng, &running);
                self.pause(cluster, paused);
            }
            93..=99 if !running.is_empty() => {
                let faulty = pick(&mut self.rng, &running);
                self.fault_disk(cluster, faulty);
            }
            _ => {}
        }
        Ok(())
    }

    /// Ends every fault: partitions, link faults, pauses and disk faults; restarts the
    /// crashed nodes.
    pub async fn heal(&mut self, cluster: &mut Cluster) -> anyhow::Result<()> {
        self.trace.record("faults heal");
        cluster.network().heal();
        self.resume_at.clear();
        for id in std::mem::take(&mut self.disk_restored_at).into_keys() {
            restore_disk(cluster, id);
        }
        for id in cluster.crashed() {
            cluster.start_node(id).await?;
        }
        Ok(())
    }

    fn isolate(&mut self, cluster: &Cluster, isolated: u64) {
        let all: Vec<u64> =
            cluster.running().iter().map(|node| node.id).chain(cluster.crashed()).collect();
        self.trace.record(format!("nemesis isolates node {isolated}"));
        cluster.network().partition(&BTreeSet::from([isolated]), &all);
    }

    fn pause(&mut self, cluster: &Cluster, id: u64) {
        let pause_ms = self.rng.range(PAUSE_MS.0, PAUSE_MS.1);
        self.trace.record(format!("nemesis pauses node {id} for {pause_ms} ms"));
        self.trace.tally("pause");
        cluster.network().pause(id);
        self.resume_at.insert(id, self.trace.now_ms() + pause_ms);
    }

    fn fault_disk(&mut self, cluster: &Cluster, id: u64) {
        let Some(disk) = cluster.disk(id) else { return };
        let lasts_ms = self.rng.range(DISK_FAULT_MS.0, DISK_FAULT_MS.1);
        let faults = if self.rng.percent(30) {
            DiskFaults { slow_factor: 1, stalled: true }
        } else {
            let slow_factor = self.rng.range(SLOW_DISK_FACTOR.0, SLOW_DISK_FACTOR.1);
            DiskFaults { slow_factor, stalled: false }
        };
        self.trace.record(format!("nemesis sets node {id}'s disk to {faults:?} for {lasts_ms} ms"));
        self.trace.tally(if faults.stalled { "stalled disk" } else { "slow disk" });
        disk.set_faults(faults);
        self.disk_restored_at.insert(id, self.trace.now_ms() + lasts_ms);
    }

    fn end_due_faults(&mut self, cluster: &Cluster) {
        let now_ms = self.trace.now_ms();
        let due = |until: &BTreeMap<u64, u64>| -> Vec<u64> {
            until.iter().filter(|(_, at)| **at <= now_ms).map(|(id, _)| *id).collect()
        };
        for id in due(&self.resume_at) {
            self.resume_at.remove(&id);
            self.trace.record(format!("nemesis resumes node {id}"));
            cluster.network().resume(id);
        }
        for id in due(&self.disk_restored_at) {
            self.disk_restored_at.remove(&id);
            restore_disk(cluster, id);
        }
    }

    fn crash_mid_snapshot(&mut self, cluster: &mut Cluster) {
        let writing: Vec<u64> = cluster
            .running()
            .iter()
            .filter(|node| node.disk.snapshot_write_in_flight())
            .map(|node| node.id)
            .collect();
        for id in writing {
            if self.rng.percent(CRASH_MID_SNAPSHOT_PERCENT) {
                self.trace.record(format!("nemesis crashes node {id} mid-snapshot"));
                self.trace.tally("crash mid-snapshot write");
                cluster.crash(id);
            }
        }
    }

    fn set_link_faults(&mut self, cluster: &Cluster) {
        let faults = LinkFaults {
            loss_percent: self.rng.range(0, LOSS_PERCENT_MAX + 1),
            duplicate_percent: self.rng.range(0, DUPLICATE_PERCENT_MAX + 1),
            slow_percent: self.rng.range(0, SLOW_PERCENT_MAX + 1),
        };
        self.trace.record(format!("nemesis sets link faults {faults:?}"));
        cluster.network().set_faults(faults);
    }
}

fn restore_disk(cluster: &Cluster, id: u64) {
    if let Some(disk) = cluster.disk(id) {
        disk.set_faults(DiskFaults::default());
    }
}
