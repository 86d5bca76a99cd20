//! `LeaderDuties`' tests: leases by term, quiet time, idle judgements.

use super::*;
use tokio::time::Instant;

/// Leases are soft state of one term: entering another term (even leading again) forgets
/// them, so nobody is judged on leases granted before the change; the same term keeps them.
#[test]
fn leases_reset_when_the_term_changes() {
    let clock = std::sync::Arc::new(crate::clock::SystemClock);
    let duties = LeaderDuties::new(
        clock,
        Duration::from_secs(1),
        Duration::from_secs(1),
        Duration::ZERO,
        Duration::ZERO,
        None,
    );
    drop(duties.enter_term(3));
    duties.trainer_alive(3, (1, 7));
    duties.pserver_granted(3, (1, 0, 1));
    drop(duties.enter_term(3));
    let later = Instant::now() + Duration::from_secs(2);
    assert_eq!(lock(&duties.trainers).expired(later), vec![(1, 7)], "same term: kept");
    drop(duties.enter_term(5));
    assert!(lock(&duties.trainers).expired(later).is_empty(), "new term: forgotten");
    assert!(lock(&duties.pservers).expired(later).is_empty(), "new term: forgotten");
}

/// A slot's new holder has a lease of its own: the run-out lease of the generation before
/// it neither makes it dead (between its claim and the next tick) nor is renewed by a late
/// heartbeat of the old generation.
#[tokio::test(start_paused = true)]
async fn a_new_slot_generation_has_its_own_lease() {
    let clock = std::sync::Arc::new(crate::clock::SystemClock);
    let duties = LeaderDuties::new(
        clock,
        Duration::from_secs(1),
        Duration::from_secs(1),
        Duration::ZERO,
        Duration::ZERO,
        None,
    );
    drop(duties.enter_term(1));
    duties.pserver_granted(1, (1, 0, 1));
    tokio::time::advance(Duration::from_millis(1_500)).await;
    assert!(!duties.pserver_alive(1, (1, 0, 1)), "a lease that ran out is not renewed");
    duties.pserver_granted(1, (1, 0, 2));
    let now = Instant::now();
    assert_eq!(lock(&duties.pservers).expired(now), vec![(1, 0, 1)], "only the old generation");
    lock(&duties.pservers).sync([(1, 0, 2)], now);
    assert!(lock(&duties.pservers).expired(now).is_empty());
    assert!(duties.pserver_alive(1, (1, 0, 2)), "the new generation renews");
}

/// Only the duty loop enters a term: a node that leads again judges nobody on a lease of
/// its previous term (the first round of the new term grants everyone a fresh one), and a
/// heartbeat or status read with a term the loop has not entered changes nothing.
#[tokio::test(start_paused = true)]
async fn only_the_duty_loop_enters_a_term() {
    let clock = std::sync::Arc::new(crate::clock::SystemClock);
    let duties = LeaderDuties::new(
        clock,
        Duration::from_secs(1),
        Duration::from_secs(1),
        Duration::ZERO,
        Duration::ZERO,
        None,
    );
    drop(duties.enter_term(3));
    duties.pserver_granted(3, (1, 0, 1));
    duties.trainer_alive(3, (1, 7));
    duties.trainer_progress(3, (1, 7), 12);
    tokio::time::advance(Duration::from_millis(1_500)).await;
    assert!(!duties.pserver_alive(3, (1, 0, 1)), "ran out in term 3: not renewed in term 3");
    tracing::info!("--- heard in term 5 before the loop entered it");
    assert!(duties.pserver_alive(5, (1, 0, 1)), "term 5's first round grants a fresh lease");
    duties.trainer_alive(5, (1, 8));
    assert_eq!(duties.trainer_heard_ago(5, (1, 8)), None, "nothing recorded for term 5 yet");
    assert_eq!(duties.trainer_tasks_done(3, (1, 7)), Some(12), "term 3's tables are untouched");
    tracing::info!("--- the loop enters term 6");
    let now = Some(Duration::ZERO);
    assert_eq!(duties.judge(6, &duties.pservers, vec![(1, 0, 1)], now), Some(vec![]));
    assert_eq!(duties.trainer_tasks_done(6, (1, 7)), None, "term 3's progress is forgotten");
    duties.trainer_alive(6, (1, 8));
    assert_eq!(duties.trainer_heard_ago(6, (1, 8)), Some(Duration::ZERO));
    tracing::info!("--- a caller late with an older term acts on the newer tables");
    duties.trainer_alive(5, (1, 9));
    assert_eq!(duties.trainer_heard_ago(6, (1, 9)), Some(Duration::ZERO));
    assert_eq!(
        duties.judge(5, &duties.trainers, vec![(1, 8), (1, 9)], now),
        None,
        "term 5 is over"
    );
}

/// A lease is judged only if it ran out before the newest heartbeat the quorum
/// acknowledged: one that ran out after (the quorum went quiet first) is held instead.
#[tokio::test(start_paused = true)]
async fn only_leases_that_ran_out_before_the_quorum_last_answered_are_judged() {
    let clock = std::sync::Arc::new(crate::clock::SystemClock);
    let duties = LeaderDuties::new(
        clock,
        Duration::from_secs(1),
        Duration::from_secs(1),
        Duration::ZERO,
        Duration::ZERO,
        None,
    );
    let (slot, ms) = ((1, 0, 1), Duration::from_millis);
    assert_eq!(duties.judge(1, &duties.pservers, vec![slot], Some(ms(0))), Some(vec![]));
    tokio::time::advance(ms(1_500)).await;
    let quiet_first = duties.judge(1, &duties.pservers, vec![slot], Some(ms(800)));
    assert_eq!(quiet_first, Some(vec![]), "the quorum last answered before the lease ended");
    assert_eq!(duties.judge(1, &duties.pservers, vec![slot], None), Some(vec![]));
    let ran_out = duties.judge(1, &duties.pservers, vec![slot], Some(ms(400)));
    assert_eq!(ran_out, Some(vec![slot]), "the quorum answered after the lease ended");
}

/// A dead holder's lease runs out within a bounded slack of its lease even when the duty
/// rounds alternate between hearing the quorum and holding (acks around the leader lease:
/// slow disks, long round trips): each quiet instant is credited once, so the lease is
/// never held longer than the time that passed. Each row: the lease, then the ack age the
/// rounds that hear and the rounds that hold see, in ms.
#[tokio::test(start_paused = true)]
async fn a_dead_holder_expires_when_rounds_alternate_between_heard_and_hold() {
    let cases: [(u64, u64, u64); 4] =
        [(1_000, 950, 1_050), (1_000, 600, 1_100), (300, 140, 160), (5_000, 990, 1_010)];
    for (lease_ms, heard_age_ms, hold_age_ms) in cases {
        let row = format!("lease {lease_ms} ms, acks {heard_age_ms}/{hold_age_ms} ms old");
        let ms = Duration::from_millis;
        let clock = std::sync::Arc::new(crate::clock::SystemClock);
        let duties = LeaderDuties::new(
            clock,
            ms(lease_ms),
            ms(lease_ms),
            Duration::ZERO,
            Duration::ZERO,
            None,
        );
        let (slot, start, round) = ((1, 0, 1), Instant::now(), ms(DUTY_TICK_MS));
        let granted = duties.judge(1, &duties.pservers, vec![slot], Some(ms(heard_age_ms)));
        assert_eq!(granted, Some(vec![]), "{row}: the first round grants a lease");
        let bound = 2 * ms(lease_ms + hold_age_ms) + 2 * round;
        let mut freed = false;
        while !freed && start.elapsed() <= bound {
            tokio::time::advance(round).await;
            duties.hold(1, Some(ms(hold_age_ms)));
            let held = lock(&duties.pservers).granted_at(slot).map(|at| at - start);
            assert!(held <= Some(start.elapsed()), "{row}: held {held:?} for longer than passed");
            tokio::time::advance(round).await;
            duties.heard(Some(ms(heard_age_ms)));
            let judged = duties.judge(1, &duties.pservers, vec![slot], Some(ms(heard_age_ms)));
            freed = judged == Some(vec![slot]);
        }
        assert!(freed, "{row}: the dead holder still holds its slot after {bound:?}");
    }
}
