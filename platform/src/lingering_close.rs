//! `linger`: how a server's connection closes without destroying the answer it just sent.
//! A socket closed while bytes it never read sit in its receive buffer is reset (RST), not
//! closed (FIN), and a reset makes the peer's kernel drop what it had received and not yet
//! read: the answer. That is exactly how a server that stops answers: an HTTP/2 server
//! refusing a large request early (a pserver handing its slot over, a standby) answers, says
//! GOAWAY and closes while the client is still sending the request's body, and the client saw
//! "broken pipe" instead of the refusal it could have retried. Lingering sends the FIN, then
//! reads and discards what the peer still sends until the peer closes too or `LINGER_MS`
//! passes, and only then closes. Each port lingers on at most as many connections as it may
//! hold open, and never on one closed for its silence (that peer gets no more time).

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The longest a closed connection keeps reading what its peer still sends.
const LINGER_MS: u64 = 1_000;
/// How much one read discards.
const DISCARD_BYTES: usize = 16 * 1024;

/// Keeps a duplicate of `stream`'s socket open, reading and discarding, after the stream
/// itself is dropped; does nothing when the port already lingers on its most connections or
/// no runtime runs.
pub(crate) fn linger(stream: &TcpStream, lingering: &Arc<Semaphore>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let Ok(slot) = lingering.clone().try_acquire_owned() else {
        return;
    };
    let Ok(socket) = stream.as_fd().try_clone_to_owned() else {
        return;
    };
    runtime.spawn(drain(std::net::TcpStream::from(socket), slot));
}

/// Sends the FIN, then reads until the peer closes, fails or `LINGER_MS` passes.
async fn drain(socket: std::net::TcpStream, _slot: OwnedSemaphorePermit) {
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
