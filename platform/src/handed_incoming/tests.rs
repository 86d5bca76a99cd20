//! A connection accepted while one server held the stream, and not taken by it, is served by
//! the next: real loopback sockets.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_stream::StreamExt;

use super::*;

#[tokio::test]
async fn a_connection_the_first_server_did_not_take_goes_to_the_next() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let first = HandedIncoming::new(listener, &PortLimits::default());
    let second = first.clone();
    let mut client = tokio::net::TcpStream::connect(addr).await.expect("connect");
    client.write_all(b"request").await.expect("send");
    // Long enough for the accept loop to queue the connection (nothing fails if it has not).
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(first);

    let mut second = std::pin::pin!(second);
    let mut served = second.next().await.expect("a connection").expect("accepted");
    let mut request = [0u8; 7];
    served.read_exact(&mut request).await.expect("the request arrives");
    assert_eq!(&request, b"request");
    served.write_all(b"answer").await.expect("answer");
    let mut answer = [0u8; 6];
    client.read_exact(&mut answer).await.expect("the answer arrives: the connection stayed open");
    assert_eq!(&answer, b"answer");
}

#[tokio::test]
async fn accepting_stops_with_the_last_handle() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let incoming = HandedIncoming::new(listener, &PortLimits::default());
    let mut client = tokio::net::TcpStream::connect(addr).await.expect("connect");
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(incoming);
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(10), client.read(&mut byte)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "the queued connection is closed once no server can take it: {read:?}"
    );
}
