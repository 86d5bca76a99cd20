//! `linger`: how a server's connection closes without destroying the answer it just sent.
//! A socket closed while bytes it never read sit in its receive buffer is reset (RST), not
//! closed (FIN), and the reset broke the peer's connection before the peer had read the
//! answer the server sent last. That is exactly how a server that stops answers: an HTTP/2
//! server refusing a large request early (a pserver handing its slot over, a standby) answers,
//! says GOAWAY and closes while the client is still sending the request's body, and the client
//! saw "broken pipe" instead of the refusal it would have retried. Lingering sends the FIN,
//! then reads and discards what the peer still sends until the peer closes too or `LINGER_MS`
//! passes, and only then closes. Only a connection with unread bytes lingers (without them a
//! close is a FIN), and it keeps its connection permit meanwhile: a port holds no more sockets
//! than its cap, and an idle connection closed to make room gives its place back at once.

use std::os::fd::AsFd;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

/// The longest a closed connection keeps reading what its peer still sends: many round trips
/// for a peer that stops sending once it reads the answer.
const LINGER_MS: u64 = 500;
/// How much one read discards.
const DISCARD_BYTES: usize = 16 * 1024;

/// Keeps a duplicate of `stream`'s socket open (and `permit` held), reading and discarding,
/// after the stream itself is dropped, when bytes it has not read are waiting; does nothing
/// otherwise or when no runtime runs.
pub(crate) fn linger(stream: &TcpStream, permit: OwnedSemaphorePermit) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let Ok(socket) = stream.as_fd().try_clone_to_owned() else {
        return;
    };
    // The duplicate shares the socket's non-blocking mode: this peek never waits.
    let socket = std::net::TcpStream::from(socket);
    if !matches!(socket.peek(&mut [0u8; 1]), Ok(waiting) if waiting > 0) {
        return;
    }
    runtime.spawn(drain(socket, permit));
}

/// Sends the FIN, then reads until the peer closes, fails or `LINGER_MS` passes.
async fn drain(socket: std::net::TcpStream, _permit: OwnedSemaphorePermit) {
    if socket.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(mut stream) = TcpStream::from_std(socket) else {
        return;
    };
    let _ = stream.shutdown().await;
    let discard = async {
        let mut buffer = vec![0u8; DISCARD_BYTES];
        while matches!(stream.read(&mut buffer).await, Ok(read) if read > 0) {}
    };
    let _ = tokio::time::timeout(Duration::from_millis(LINGER_MS), discard).await;
}
