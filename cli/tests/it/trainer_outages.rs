//! Real processes: trainers wait out what used to kill them. A majority of the masters down
//! longer than the old 30 s call deadline, a pserver slot without a holder (readiness says so,
//! and a limit is only there when asked for), and a pserver table gone stale because the
//! trainers' watch streams sat on a paused leader while a standby took over a slot. Waiting
//! without limit does not make a trainer deaf to SIGTERM.

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::master_group::free_loopback_addr;
use crate::metrics::http;
use crate::training::{synth, wait_for_done};
use crate::training_job::TrainingJob;

/// Longer than the call deadline trainers had before (30 s).
const OUTAGE_S: u64 = 40;
const READYZ: &str = "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/// A softmax job long enough to be mid-way when the fault comes.
fn job_args(train: &str) -> Vec<String> {
    let args = [
        "--dataset",
        train,
        "--model",
        "softmax",
        "--classes",
        "3",
        "--passes",
        "6",
        "--batch-size",
        "32",
        "--learning-rate",
        "0.05",
    ];
    args.iter().map(|arg| arg.to_string()).collect()
}

fn start_job(dir: &std::path::Path, pserver_count: u32) -> TrainingJob {
    let (train, _) = synth(dir, "blobs", "3000", "2.5");
    let args = job_args(&train);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    TrainingJob::start(3, pserver_count, dir, &args)
}

/// Every pserver process started so far still runs.
fn assert_pservers_running(job: &mut TrainingJob, indexes: &[usize]) {
    for &index in indexes {
        let exit = job.pservers.wait_exit(index, Duration::from_millis(10));
        assert_eq!(exit, None, "pserver {index} exited\n{}", job.logs());
    }
}

/// Two of three masters killed for 40 s mid-job: every trainer and pserver waits (the trainers
/// say so in their logs and answer 503 on /readyz), then carries on once the masters are back;
/// every process exits 0 and the job finishes. (Before, every trainer exited after 30 s.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_outage_longer_than_the_old_deadline_is_waited_out() {
    let dir = tempfile::tempdir().expect("temp");
    let mut job = start_job(dir.path(), 2);
    let metrics_addr = free_loopback_addr();
    job.spawn_trainer_with(&["--metrics-listen", &metrics_addr]);
    job.spawn_trainer();
    wait_for_done(&job, 5).await;

    tracing::info!("--- kill the leader and one follower for {OUTAGE_S} s");
    let leader = job.masters.leader_index().await;
    let follower = (leader + 1) % 3;
    job.masters.kill(leader);
    job.masters.kill(follower);
    tokio::time::sleep(Duration::from_secs(OUTAGE_S)).await;
    for index in 0..2 {
        assert_eq!(job.trainer_exit(index), None, "trainer {index} gave up\n{}", job.logs());
    }
    assert_pservers_running(&mut job, &[0, 1]);
    let readyz = http(&metrics_addr, READYZ);
    assert!(readyz.starts_with("HTTP/1.1 503"), "not ready while no leader answers: {readyz}");
    assert!(
        job.trainer_log(0).contains("still trying"),
        "the wait is logged\n{}",
        job.trainer_log(0)
    );

    tracing::info!("--- the masters come back; the job goes on and finishes");
    job.masters.spawn(leader);
    job.masters.spawn(follower);
    job.wait_trainers(Duration::from_secs(120));
    assert!(job.masters.status().await.job_finished, "every pass finished");
    assert_pservers_running(&mut job, &[0, 1]);
}

/// A pserver slot left without a holder: the trainer waits (503 on /readyz, "waiting for a
/// pserver slot") instead of counting down to a limit, and goes on when a replacement claims
/// the slot; a limit applies only when asked for (`--pserver-wait-s`), as a newcomer that
/// cannot get every slot held shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_without_a_holder_is_waited_for_and_a_limit_is_opt_in() {
    let dir = tempfile::tempdir().expect("temp");
    let mut job = start_job(dir.path(), 2);
    let metrics_addr = free_loopback_addr();
    let waiter = job.spawn_trainer_with(&["--metrics-listen", &metrics_addr]);
    wait_for_done(&job, 3).await;

    tracing::info!("--- kill -9 the holder of slot 0; no standby");
    let table = job.masters.client().list_pservers().await.expect("list pservers");
    let holder = table.pservers.iter().find(|entry| entry.slot == 0).expect("slot 0 held");
    let killed = job.pservers.addrs.iter().position(|addr| *addr == holder.addr).expect("ours");
    job.pservers.kill(killed);
    let impatient = job.spawn_trainer_with(&["--pserver-wait-s", "2"]);
    let mut impatient_exit = None;
    for _ in 0..600 {
        impatient_exit = job.trainer_exit(impatient);
        if impatient_exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(matches!(impatient_exit, Some(code) if code != 0), "{}", job.logs());
    assert!(job.trainer_log(impatient).contains("pserver slot"), "{}", job.logs());
    let readyz = http(&metrics_addr, READYZ);
    assert!(readyz.contains("503") && readyz.contains("pserver slot"), "{readyz}");
    assert_eq!(job.trainer_exit(waiter), None, "the trainer waits\n{}", job.logs());

    tracing::info!("--- a replacement claims the slot; the trainer goes on and finishes");
    job.pservers.spawn();
    job.wait_trainers(Duration::from_secs(120));
    assert!(job.masters.status().await.job_finished, "every pass finished");
}

/// The leader paused: once another master leads, the holder of slot 0 is killed and a standby
/// claims the slot through the new leader. The trainers' watch streams sat on the paused
/// leader; keepalive finds them dead (or a re-read of the table finds the new holder) and the
/// trainers finish the job. (Before, they never learned of the new holder and exited.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_pserver_table_on_a_paused_leader_is_outgrown() {
    let dir = tempfile::tempdir().expect("temp");
    let mut job = start_job(dir.path(), 2);
    job.pservers.spawn();
    job.spawn_trainer();
    job.spawn_trainer();
    wait_for_done(&job, 5).await;

    tracing::info!("--- pause the leader; wait until another leads");
    let paused = job.masters.leader_index().await;
    job.masters.signal(paused, Signal::SIGSTOP);
    let mut leader = paused;
    for _ in 0..100 {
        leader = job.masters.leader_index().await;
        if leader != paused {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_ne!(leader, paused, "another master leads\n{}", job.logs());

    tracing::info!(
        "--- kill -9 the holder of slot 0; the standby (whichever started last) claims it"
    );
    let client = job.masters.client();
    let table = client.list_pservers().await.expect("list pservers");
    let holder = table.pservers.iter().find(|entry| entry.slot == 0).expect("slot 0 held");
    assert!(
        holder.generation <= 2,
        "the first holder kept slot 0 through the pause\n{}",
        job.logs()
    );
    let killed = job.pservers.addrs.iter().position(|addr| *addr == holder.addr).expect("ours");
    job.pservers.kill(killed);
    let mut claimed = false;
    for _ in 0..300 {
        let table = client.list_pservers().await.expect("list pservers");
        claimed = table.pservers.iter().any(|entry| {
            entry.slot == 0 && entry.addr != holder.addr && entry.generation > holder.generation
        });
        if claimed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(claimed, "the standby holds slot 0\n{}", job.logs());

    tracing::info!("--- the trainers learn of the new holder and finish");
    job.wait_trainers(Duration::from_secs(100));
    assert!(client.status().await.expect("status").job_finished, "every pass finished");
    job.masters.signal(paused, Signal::SIGCONT);
}

/// A trainer waiting for masters that are all down still stops at SIGTERM, within the grace
/// its current task gets (5 s), and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_trainer_that_waits_for_the_masters() {
    let dir = tempfile::tempdir().expect("temp");
    let mut job = start_job(dir.path(), 1);
    let trainer = job.spawn_trainer();
    wait_for_done(&job, 3).await;

    tracing::info!("--- every master killed; the trainer waits; SIGTERM stops it");
    for index in 0..3 {
        job.masters.kill(index);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(job.trainer_exit(trainer), None, "the trainer waits\n{}", job.logs());
    job.signal_trainer(trainer, Signal::SIGTERM);
    let mut exit = None;
    for _ in 0..300 {
        exit = job.trainer_exit(trainer);
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(exit, Some(0), "stopped at SIGTERM, cleanly\n{}", job.logs());
}
