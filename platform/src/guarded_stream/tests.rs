//! Closing a connection whose peer is still sending: real loopback sockets. The peer does
//! what an HTTP/2 client uploading a large request does: it sends the whole body and reads
//! the answer after, giving up on the connection when a send fails.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::guarded_listener::GuardedListener;
use crate::port_limits::PortLimits;

/// More than the loopback socket buffers hold: most of it is sent after the server closed.
const UPLOAD_BYTES: usize = 32 * 1024 * 1024;

/// Sends the whole upload, then reads the answer: what it read, or where it failed.
async fn upload_then_read(mut client: tokio::net::TcpStream) -> Result<Vec<u8>, String> {
    let upload = vec![7u8; UPLOAD_BYTES];
    client.write_all(&upload).await.map_err(|error| format!("sending: {error}"))?;
    let mut answer = Vec::new();
    client.read_to_end(&mut answer).await.map_err(|error| format!("reading: {error}"))?;
    Ok(answer)
}

#[tokio::test]
async fn an_answer_sent_before_closing_reaches_a_peer_still_sending() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let mut guarded = GuardedListener::new(listener, &PortLimits::default());
    let client = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let peer = tokio::spawn(upload_then_read(client));
    let (mut served, _peer) = guarded.accept_guarded().await;
    let mut first = [0u8; 1024];
    served.read_exact(&mut first).await.expect("the upload starts");
    // The server answers early and closes, as one refusing the upload does.
    served.write_all(b"refused").await.expect("answer");
    served.shutdown().await.expect("FIN");
    drop(served);

    let answer = tokio::time::timeout(Duration::from_secs(30), peer).await;
    let answer = answer.expect("the peer finishes").expect("the peer's task");
    assert_eq!(answer.as_deref(), Ok(&b"refused"[..]), "the answer survives the close");
}

/// A port that holds one connection: an idle one, closed, gives its place back at once (it
/// has nothing unread, so it does not linger), and the next connection is taken, not refused.
#[tokio::test]
async fn a_connection_closed_with_nothing_unread_gives_its_place_back_at_once() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let limits = PortLimits { connections_max: Some(1), ..PortLimits::default() };
    let mut guarded = GuardedListener::new(listener, &limits);
    let _first = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (served, _peer) = guarded.accept_guarded().await;
    drop(served);

    let mut second = tokio::net::TcpStream::connect(addr).await.expect("connect again");
    let accepted = tokio::time::timeout(Duration::from_secs(10), guarded.accept_guarded()).await;
    let (mut served, _peer) = accepted.expect("the second connection is taken");
    served.write_all(b"taken").await.expect("answer");
    let mut answer = [0u8; 5];
    second.read_exact(&mut answer).await.expect("the second connection is served");
    assert_eq!(&answer, b"taken");
}
