//! Loopback addresses for child processes to listen on.
//!
//! Picked below the kernel's ephemeral port range (`ip_local_port_range`, 32768-60999 by
//! default), one port after another from an offset drawn from the process id: `bind(0)` and
//! every outgoing connection of every process draw their ports from that range, so a port
//! picked there with `bind(0)` and released can be taken again (by the next `bind(0)`, here or
//! in a child, or as a connection's local port) before the child given it binds it. A pserver
//! of the fault harness given such a port found it held by another process's connection on
//! every restart ("Address already in use"). Below the range only an explicit bind can take
//! it, and this process never hands out one port twice.

use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port picked.
const PICKED_PORT_LOW: u16 = 15_000;

/// `count` loopback addresses nothing listens on right now, each handed out once per process.
pub fn free_loopback_addrs(count: usize) -> anyhow::Result<Vec<String>> {
    (0..count).map(|_| free_loopback_addr()).collect()
}

/// One loopback address nothing listens on right now (see the module's documentation).
pub fn free_loopback_addr() -> anyhow::Result<String> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = (PICKED_PORT_LOW, ephemeral_port_low().max(PICKED_PORT_LOW + 1000));
    let span = u32::from(high - low);
    let offset = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let next = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = low + (offset.wrapping_add(next) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(format!("127.0.0.1:{port}"));
        }
    }
    anyhow::bail!("no free loopback port in {low}..{high}")
}

/// The first port of the kernel's ephemeral range.
fn ephemeral_port_low() -> u16 {
    let range =
        std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    range.split_whitespace().next().and_then(|low| low.parse().ok()).unwrap_or(32_768)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses come from below the ephemeral range, free, and never twice.
    #[test]
    fn addresses_are_below_the_ephemeral_range_and_distinct() -> anyhow::Result<()> {
        let addrs = free_loopback_addrs(50)?;
        let ports: std::collections::BTreeSet<u16> = addrs
            .iter()
            .map(|addr| addr.rsplit(':').next().and_then(|port| port.parse().ok()))
            .collect::<Option<_>>()
            .expect("every address has a port");
        assert_eq!(ports.len(), addrs.len(), "a port handed out twice: {addrs:?}");
        let high = ephemeral_port_low().max(PICKED_PORT_LOW + 1000);
        assert!(ports.iter().all(|port| (PICKED_PORT_LOW..high).contains(port)), "{ports:?}");
        Ok(())
    }
}
