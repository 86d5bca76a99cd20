//! `RendezvousWaits`: the cap on rendezvous reads waiting for keys, per client and in all, so
//! a client can make a master hold only its share of waiting calls.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tonic::Status;

/// The most reads one client may have waiting at once (a torchrun agent waits for one key
/// set at a time; the headroom is for its workers' retries).
pub(crate) const WAITS_PER_CLIENT_MAX: usize = 16;
/// The most waiting reads a master holds at once.
pub(crate) const WAITS_MAX: usize = 1_024;
/// The longest one read waits; a client waiting longer asks again.
pub(crate) const WAIT_MS_MAX: u64 = 10_000;

#[derive(Default)]
pub(crate) struct RendezvousWaits {
    by_client: Mutex<BTreeMap<u64, usize>>,
}

/// One admitted wait; dropping it gives the place back.
pub(crate) struct WaitPlace<'a> {
    waits: &'a RendezvousWaits,
    client_id: u64,
}

impl RendezvousWaits {
    /// A place for one waiting read of `client_id`, or `RESOURCE_EXHAUSTED` naming the cap.
    pub(crate) fn admit(&self, client_id: u64) -> Result<WaitPlace<'_>, Status> {
        let mut by_client = lock(&self.by_client);
        let total: usize = by_client.values().sum();
        if total >= WAITS_MAX {
            return Err(Status::resource_exhausted(format!(
                "this master holds {WAITS_MAX} waiting rendezvous reads, the most it holds; retry"
            )));
        }
        let count = by_client.entry(client_id).or_default();
        if *count >= WAITS_PER_CLIENT_MAX {
            return Err(Status::resource_exhausted(format!(
                "client {client_id} has {WAITS_PER_CLIENT_MAX} waiting rendezvous reads, the most a client has"
            )));
        }
        *count += 1;
        Ok(WaitPlace { waits: self, client_id })
    }
}

impl Drop for WaitPlace<'_> {
    fn drop(&mut self) {
        let mut by_client = lock(&self.waits.by_client);
        if let Some(count) = by_client.get_mut(&self.client_id) {
            *count -= 1;
            if *count == 0 {
                by_client.remove(&self.client_id);
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_only_its_share_of_waits() {
        let waits = RendezvousWaits::default();
        let held: Vec<_> =
            (0..WAITS_PER_CLIENT_MAX).map(|_| waits.admit(1).expect("room")).collect();
        let refused = waits.admit(1).err().expect("the client's share is used");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(waits.admit(2).is_ok(), "another client still waits");
        drop(held);
        assert!(waits.admit(1).is_ok(), "places come back");
        assert!(lock(&waits.by_client).is_empty(), "nothing is held once every place is dropped");
    }
}
