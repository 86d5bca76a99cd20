//! `never_sent` against the raw HTTP/2 peer: each case is the exact frame sequence a server
//! sends.

use super::raw_peer::{call_against, Peer};
use super::*;

#[test]
fn a_status_without_transport_errors_may_have_been_sent() {
    assert!(!never_sent(&tonic::Status::cancelled("operation was canceled")));
    assert!(!never_sent(&tonic::Status::unavailable("connection reset")));
}

#[tokio::test]
async fn a_stream_above_the_servers_goaway_was_never_processed() {
    let status = call_against(Peer::GoAway { last: 0 }).await;
    assert!(never_sent(&status), "{status:?}");
}

#[tokio::test]
async fn a_stream_the_server_took_before_its_goaway_may_have_been_processed() {
    let status = call_against(Peer::GoAway { last: 1 }).await;
    assert!(!never_sent(&status), "{status:?}");
}

#[tokio::test]
async fn a_stream_on_a_connection_that_broke_may_have_been_processed() {
    let status = call_against(Peer::Close).await;
    assert!(!never_sent(&status), "{status:?}");
}
