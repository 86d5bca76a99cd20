//! The leader's wall clock in milliseconds: stamped into every proposed request, it is the only
//! time the replicated state machine ever sees.

use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) fn now_ms() -> u64 {
    // A clock before 1970 is a broken machine; treating it as 0 keeps deadlines in the past,
    // which expires tasks early (safe) rather than never.
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
}
