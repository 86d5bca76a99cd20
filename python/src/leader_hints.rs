//! The leaders this process's master clients found, shared with the clients it makes later: a
//! new client (each of a DataLoader worker's registrations, every pass) follows the leader
//! another client of the same key (addresses and credentials) follows, instead of asking every
//! master who leads
//! (a `ClusterInfo` call and a connection to each master, per client). A hint gone stale costs
//! a redirect or a discovery on the first call, as a leader change does.
//!
//! Read in forked children too, where a lock one of the parent's threads held at the fork is
//! never released: every lock here is only tried, and a client made while one is held simply
//! looks for the leader itself.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError, Weak};

use client::MasterClient;

/// Clients remembered at most (the oldest forgotten first): a process makes a few per loader.
const REMEMBERED_MAX: usize = 64;

/// The clients made so far in this process (or its parent, before a fork), by their keys.
static CLIENTS: Mutex<Vec<(Vec<String>, Weak<MasterClient>)>> = Mutex::new(Vec::new());

/// Makes `client` follow the leader that the newest live client of the same `key` follows, if
/// one does, and remembers it for the clients made after it.
pub fn share(key: &[String], client: &Arc<MasterClient>) {
    let Some(mut clients) = tried(&CLIENTS) else { return };
    clients.retain(|(_key, known)| known.strong_count() > 0);
    let hint = clients
        .iter()
        .rev()
        .filter(|(known_key, _known)| known_key.as_slice() == key)
        .find_map(|(_key, known)| known.upgrade()?.leader_hint());
    if let (Some(addr), Ok(runtime)) = (hint, crate::runtime::runtime()) {
        // Its channel is made on this process's runtime. An address that does not parse
        // leaves the client to look for the leader itself.
        let _entered = runtime.enter();
        let _ = client.follow_hint(&addr);
    }
    if clients.len() >= REMEMBERED_MAX {
        clients.remove(0);
    }
    clients.push((key.to_vec(), Arc::downgrade(client)));
}

/// `mutex` locked, unless another thread holds it.
fn tried<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}
