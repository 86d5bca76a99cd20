//! The failover measurement's same-run anchor: the etcd group's leader taken down (kill -9, or
//! SIGTERM, on which etcd 3.4 hands leadership to a follower before it exits) and the time from
//! the signal until the next `Put` succeeds. The probe asks every member at once and takes the
//! first answer, as a client given all three endpoints would (a follower forwards a `Put` to
//! the leader, so any live member answers once there is one). No other load: etcd is measured
//! at its best.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::task::JoinSet;

use super::etcd::{EtcdClient, EtcdGroup};
use super::master::TakeDown;

/// A failover must end within this long.
const FAILOVER_MS_MAX: u64 = 60_000;
/// How often a new round of probes starts.
const PROBE_EVERY_MS: u64 = 20;
/// A SIGTERM'd member must exit within this long.
const EXIT_WAIT: Duration = Duration::from_secs(20);

/// `failovers` take-downs of the leader, each followed by a restart of the member once the
/// group has a new leader; the time from each signal to the next successful `Put`.
pub(crate) async fn measure(
    group: &mut EtcdGroup,
    take_down: TakeDown,
    failovers: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(failovers);
    for round in 0..failovers {
        let leader = group.wait_for_leader_index().await?;
        let signalled_at = Instant::now();
        match take_down {
            TakeDown::Kill => group.processes().kill(leader),
            TakeDown::Terminate => {
                group.processes().signal(leader, nix::sys::signal::Signal::SIGTERM)?
            }
        }
        times.push(next_put(group.client_addrs(), signalled_at, round).await?);
        restart(group, leader, take_down)?;
        group.wait_until_rejoined(leader).await?;
        tokio::time::sleep(super::master::LEADER_SETTLE).await;
    }
    Ok(times)
}

/// The member taken down, started again on its data directory (after its own exit, for
/// SIGTERM).
fn restart(group: &mut EtcdGroup, member: usize, take_down: TakeDown) -> anyhow::Result<()> {
    if let TakeDown::Terminate = take_down {
        let processes = group.processes();
        let exited = tokio::task::block_in_place(|| processes.wait_exit(member, EXIT_WAIT));
        exited.with_context(|| format!("etcd member {member} did not exit on SIGTERM"))?;
    }
    group.processes().spawn(member)
}

/// The time from `since` to the first `Put` any member answers. A new round of probes (one
/// per member) starts every `PROBE_EVERY_MS` while earlier ones still wait: a `Put` a follower
/// forwarded to the dead leader waits for etcd's request timeout (7 s), and one sent after the
/// election is answered at once.
async fn next_put(addrs: &[String], since: Instant, round: usize) -> anyhow::Result<Duration> {
    let deadline = since + Duration::from_millis(FAILOVER_MS_MAX);
    let mut probes = JoinSet::new();
    let mut next_round = tokio::time::Instant::now();
    loop {
        anyhow::ensure!(
            Instant::now() < deadline,
            "etcd answered no Put within {FAILOVER_MS_MAX} ms of taking its leader down"
        );
        if tokio::time::Instant::now() >= next_round {
            for addr in addrs {
                probes.spawn(probe(addr.clone(), round));
            }
            next_round += Duration::from_millis(PROBE_EVERY_MS);
        }
        tokio::select! {
            Some(answer) = probes.join_next() => {
                if let Ok(Ok(())) = answer {
                    return Ok(since.elapsed());
                }
            }
            () = tokio::time::sleep_until(next_round) => {}
        }
    }
}

/// One `Put` through the member at `addr`.
async fn probe(addr: String, round: usize) -> anyhow::Result<()> {
    let mut client = EtcdClient::connect(&addr).await?;
    client.put(format!("failover-{round}"), "1".into()).await
}
