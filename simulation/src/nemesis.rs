//! The fault injector: at each of its turns it draws one fault from the seed (crash a node,
//! crash every node at once, restart one, isolate one, heal partitions, change link faults) or
//! does nothing.

use std::collections::BTreeSet;

use crate::cluster::Cluster;
use crate::network::LinkFaults;
use crate::rng::SimRng;
use crate::trace::Trace;

/// Upper bounds of the link faults the injector sets.
const LOSS_PERCENT_MAX: u64 = 25;
const DUPLICATE_PERCENT_MAX: u64 = 10;
const SLOW_PERCENT_MAX: u64 = 20;

/// Draws and applies faults.
pub struct Nemesis {
    rng: SimRng,
    trace: Trace,
}

impl Nemesis {
    pub fn new(rng: SimRng, trace: Trace) -> Self {
        Self { rng, trace }
    }

    /// Takes one turn.
    pub async fn act(&mut self, cluster: &mut Cluster) -> anyhow::Result<()> {
        let running: Vec<u64> = cluster.running().iter().map(|node| node.id).collect();
        let crashed = cluster.crashed();
        match self.rng.range(0, 100) {
            0..=44 => {}
            45..=54 if !running.is_empty() => cluster.crash(running[self.rng.index(running.len())]),
            55..=57 => {
                self.trace.record("nemesis crashes every node");
                running.iter().for_each(|id| cluster.crash(*id));
            }
            58..=74 if !crashed.is_empty() => {
                cluster.start_node(crashed[self.rng.index(crashed.len())]).await?;
            }
            75..=82 if !running.is_empty() => {
                let all =
                    cluster.running().iter().map(|node| node.id).chain(crashed).collect::<Vec<_>>();
                let isolated = running[self.rng.index(running.len())];
                self.trace.record(format!("nemesis isolates node {isolated}"));
                cluster.network().partition(&BTreeSet::from([isolated]), &all);
            }
            83..=90 => {
                self.trace.record("nemesis heals the network");
                cluster.network().heal();
            }
            91..=99 => self.set_link_faults(cluster),
            _ => {}
        }
        Ok(())
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
