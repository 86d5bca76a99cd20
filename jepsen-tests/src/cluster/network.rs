//! Network faults between the masters: isolate a side, cut one direction of a link, clog or
//! half-open a master's links, heal everything; through the per-link TCP proxies, or with
//! `--netns` through the masters' namespaces.

use super::{Cluster, MASTER_COUNT};
use crate::proxy::LinkProxy;

impl Cluster {
    /// Makes every link of master `index` half-open: packets vanish, nothing is refused or
    /// reset. With namespaces the master's host falls silent for everyone (peers and clients);
    /// with proxies its Raft links to and from its peers stall (clients still reach it).
    /// Returns how: `"netns-pfifo-drop"` or `"proxy-stall"`.
    pub fn half_open(&self, index: usize) -> anyhow::Result<&'static str> {
        if let Some(namespaces) = &self.namespaces {
            namespaces.silence(index)?;
            return Ok("netns-pfifo-drop");
        }
        for ((from, to), link) in &self.links {
            if *from == index || *to == index {
                link.stall();
            }
        }
        Ok("proxy-stall")
    }

    /// Cuts every link between `side` and the other masters, both ways.
    pub fn isolate(&self, side: &[usize]) -> anyhow::Result<()> {
        for from in 0..MASTER_COUNT {
            for to in (0..MASTER_COUNT).filter(|to| side.contains(&from) != side.contains(to)) {
                self.cut(from, to)?;
            }
        }
        Ok(())
    }

    /// Cuts the link `from -> to` (a proxy: that direction's connections; a namespace: every
    /// packet `from` sends to `to`).
    pub fn cut(&self, from: usize, to: usize) -> anyhow::Result<()> {
        if let Some(namespaces) = &self.namespaces {
            return namespaces.cut(from, to);
        }
        if let Some(link) = self.links.get(&(from, to)) {
            link.cut();
        }
        Ok(())
    }

    /// Degrades master `index`'s links: with namespaces and `netem`, 150 ms of delay and 20%
    /// loss on everything it sends; otherwise its link to the next master is cut.
    pub fn clog(&self, index: usize) -> anyhow::Result<()> {
        match &self.namespaces {
            Some(namespaces) if namespaces.can_slow() => namespaces.slow(index, 150, 20),
            _ => self.cut(index, (index + 1) % MASTER_COUNT),
        }
    }

    /// Heals every link.
    pub fn heal_links(&self) -> anyhow::Result<()> {
        self.links.values().for_each(LinkProxy::heal);
        match &self.namespaces {
            Some(namespaces) => namespaces.heal(),
            None => Ok(()),
        }
    }
}
