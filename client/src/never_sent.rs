//! `never_sent`: whether a failed call's request never reached a server that could act on it.
//! Two transport errors say so, and only the error sources of the status tell them from a
//! request cut off mid-flight (tonic gives both kinds the same codes):
//! - hyper's "canceled": the request was queued on an HTTP/2 connection that closed before
//!   taking it (`CANCELLED`);
//! - h2's GOAWAY received from the server: the server said it stops taking streams and this
//!   one was above the last stream it processed, or it was opened after the GOAWAY arrived
//!   (`INTERNAL`). A server stopping gracefully (a pserver handing its slot over, a standby
//!   handing its port over) answers the calls it took and refuses the rest this way; RFC 9113
//!   section 6.8 promises the refused ones were not processed. A GOAWAY this side sent, or a
//!   connection that broke, is a different error and stays "may have been acted on".
//!
//! Only a request never sent is safe to send again when the call is not idempotent.

use std::error::Error;

/// True when `status` carries hyper's "canceled" error or h2's GOAWAY from the server: the
/// server acted on none of the request.
pub fn never_sent(status: &tonic::Status) -> bool {
    let mut source = status.source();
    while let Some(error) = source {
        if let Some(hyper) = error.downcast_ref::<hyper::Error>() {
            if hyper.is_canceled() {
                return true;
            }
        }
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            return h2.is_go_away() && h2.is_remote();
        }
        source = error.source();
    }
    false
}

#[cfg(test)]
pub(crate) mod raw_peer;
#[cfg(test)]
mod tests;
