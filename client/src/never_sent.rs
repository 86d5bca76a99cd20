//! `never_sent`: whether a failed call's request never left this process. A request queued on
//! an HTTP/2 connection that closed before taking it (the server said GOAWAY, or the
//! connection was not ready) fails with hyper's "canceled" error, which tonic reports as
//! `CANCELLED`, the same code a request cut off mid-flight gets. Only the first is safe to send
//! again when the call is not idempotent, and only hyper's error in the status' sources tells
//! them apart.

use std::error::Error;

/// True when `status` carries hyper's "canceled" error: the request was dropped from the
/// connection's queue unsent, so the server saw none of it.
pub fn never_sent(status: &tonic::Status) -> bool {
    let mut source = status.source();
    while let Some(error) = source {
        if let Some(hyper) = error.downcast_ref::<hyper::Error>() {
            return hyper.is_canceled();
        }
        source = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_status_without_hyper_s_error_may_have_been_sent() {
        assert!(!never_sent(&tonic::Status::cancelled("operation was canceled")));
        assert!(!never_sent(&tonic::Status::unavailable("connection reset")));
    }
}
