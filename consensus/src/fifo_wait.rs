//! Waiting for a condition that a `tokio::sync::Notify` announces. `notify_waiters` wakes
//! waiters in the order they began to wait, so tasks woken together run in one order from run
//! to run and the simulation replays a seed (a `tokio::sync::watch` draws the order from
//! tokio's unseeded random numbers; see `durable_log`).

use tokio::sync::Notify;

/// Returns `check`'s answer once it has one, checking again after each notification.
pub(crate) async fn until<T>(notify: &Notify, mut check: impl FnMut() -> Option<T>) -> T {
    loop {
        // Registered before the check, so a notification between the two is not missed.
        let mut notified = std::pin::pin!(notify.notified());
        notified.as_mut().enable();
        if let Some(answer) = check() {
            return answer;
        }
        notified.await;
    }
}
