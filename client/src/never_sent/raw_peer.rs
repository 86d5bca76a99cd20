//! A raw HTTP/2 peer on a loopback socket for tests that need a transport error exactly as a
//! server's frames cause it (a GOAWAY above or below the call's stream, a dropped connection),
//! not as a real server's timing happens to produce it.

use proto::pserver::p_server_service_client::PServerServiceClient;
use proto::pserver::PullParamsRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];
const HEADERS: u8 = 1;
const PREFACE_BYTES: usize = 24;

/// What the peer does once the call's HEADERS frame (stream 1) arrived.
#[derive(Clone, Copy)]
pub(crate) enum Peer {
    /// GOAWAY naming `last` as the last stream processed, then closes the connection.
    GoAway { last: u32 },
    /// Closes the connection without a word.
    Close,
}

fn go_away(last: u32) -> Vec<u8> {
    let mut frame = vec![0, 0, 8, 7, 0, 0, 0, 0, 0];
    frame.extend_from_slice(&last.to_be_bytes());
    frame.extend_from_slice(&0u32.to_be_bytes()); // NO_ERROR: a graceful stop
    frame
}

/// Reads frames until a HEADERS frame, as the peer of one connection.
async fn until_headers(socket: &mut TcpStream) -> std::io::Result<()> {
    let mut preface = [0u8; PREFACE_BYTES];
    socket.read_exact(&mut preface).await?;
    loop {
        let mut header = [0u8; 9];
        socket.read_exact(&mut header).await?;
        let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; length];
        socket.read_exact(&mut payload).await?;
        if header[3] == HEADERS {
            return Ok(());
        }
    }
}

async fn peer(listener: TcpListener, behaviour: Peer) -> std::io::Result<()> {
    let (mut socket, _) = listener.accept().await?;
    socket.write_all(&SETTINGS).await?;
    until_headers(&mut socket).await?;
    if let Peer::GoAway { last } = behaviour {
        socket.write_all(&go_away(last)).await?;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Ok(())
}

/// The status one call gets from a peer behaving as `behaviour`.
pub(crate) async fn call_against(behaviour: Peer) -> tonic::Status {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(peer(listener, behaviour));
    let security = platform::security::Security::new(None, None);
    let endpoint = security.endpoint(&addr.to_string()).expect("endpoint");
    let channel = endpoint.connect().await.expect("connect");
    let answer = PServerServiceClient::new(channel)
        .pull_params(PullParamsRequest { fence: None, blocks: Vec::new() })
        .await;
    server.await.expect("the peer").expect("the peer's socket");
    answer.expect_err("the peer answers nothing")
}
