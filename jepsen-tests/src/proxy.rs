//! `LinkProxy`: one direction of one link between two masters, a TCP proxy the harness can cut
//! and heal. Master A dials master B's Raft port through the proxy for (A, B), so cutting it
//! drops A's traffic to B (and B's answers on those connections) without touching anything
//! else, as a real partition does. A stalled link is half-open instead: connections stay open
//! (and new ones are accepted) but no byte passes either way and nothing is reset, as when a
//! network drops packets silently; at the heal the bytes held back flow again.

use std::sync::Arc;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What a link does with traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LinkState {
    Open,
    /// Connections reset, new ones closed at once.
    Cut,
    /// Connections kept open, no byte forwarded, nothing reset.
    Stalled,
}

/// Bytes a stalled link holds back per direction of a connection before it stops reading.
const HELD_BYTES_MAX: usize = 64 * 1024;

/// A running proxy; it stops when dropped.
pub struct LinkProxy {
    addr: String,
    state: Arc<watch::Sender<LinkState>>,
    task: JoinHandle<()>,
}

impl LinkProxy {
    /// Listens on a free loopback port and forwards each connection to `target`.
    pub async fn start(target: String) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let (state, _) = watch::channel(LinkState::Open);
        let state = Arc::new(state);
        let task = tokio::spawn(accept_loop(listener, target, state.clone()));
        Ok(Self { addr, state, task })
    }

    /// Where to dial instead of the target.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Cuts the link: open connections are reset and new ones closed at once, until healed.
    pub fn cut(&self) {
        self.state.send_replace(LinkState::Cut);
    }

    /// Makes the link half-open: open connections stay open but carry nothing, new ones are
    /// accepted and carry nothing, until healed (a cut resets them).
    pub fn stall(&self) {
        self.state.send_replace(LinkState::Stalled);
    }

    pub fn heal(&self) {
        self.state.send_replace(LinkState::Open);
    }

    pub fn is_cut(&self) -> bool {
        *self.state.borrow() == LinkState::Cut
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, target: String, state: Arc<watch::Sender<LinkState>>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((inbound, _)) = listener.accept().await else { continue };
        if *state.borrow() == LinkState::Cut {
            drop(inbound);
            continue;
        }
        connections.spawn(forward(inbound, target.clone(), state.subscribe()));
        while connections.try_join_next().is_some() {}
    }
}

/// Copies both ways until either side closes or the link is cut; while the link is stalled
/// nothing moves (a connection accepted then dials its target only once the link opens).
async fn forward(mut inbound: TcpStream, target: String, mut state: watch::Receiver<LinkState>) {
    if state.wait_for(|state| *state == LinkState::Open).await.is_err() {
        return;
    }
    let Ok(mut outbound) = TcpStream::connect(&target).await else { return };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (inbound_reader, inbound_writer) = inbound.split();
    let (outbound_reader, outbound_writer) = outbound.split();
    let both_ways = futures_join(
        pump(inbound_reader, outbound_writer, state.clone()),
        pump(outbound_reader, inbound_writer, state.clone()),
    );
    tokio::select! {
        _ = both_ways => {}
        _ = state.wait_for(|state| *state == LinkState::Cut) => {
            // Reset rather than close, so neither end waits for a graceful end.
            let _ = inbound.set_zero_linger();
            let _ = outbound.set_zero_linger();
        }
    }
    let _ = inbound.shutdown().await;
}

async fn futures_join(
    first: impl std::future::Future<Output = ()>,
    second: impl std::future::Future<Output = ()>,
) {
    tokio::join!(first, second);
}

/// Copies `reader` to `writer` until either ends; while the link is stalled, bytes read are
/// held (up to [`HELD_BYTES_MAX`], then reading stops too) and written once it opens again.
async fn pump(
    mut reader: tokio::net::tcp::ReadHalf<'_>,
    mut writer: tokio::net::tcp::WriteHalf<'_>,
    mut state: watch::Receiver<LinkState>,
) {
    let mut buffer = vec![0u8; HELD_BYTES_MAX];
    loop {
        let Ok(read) = reader.read(&mut buffer).await else { return };
        if read == 0 {
            let _ = writer.shutdown().await;
            return;
        }
        if state.wait_for(|state| *state == LinkState::Open).await.is_err() {
            return;
        }
        if writer.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Bytes pass both ways; a cut resets the open connection and refuses new ones; a heal
    /// lets new ones through again.
    #[tokio::test]
    async fn forwards_cuts_and_heals() -> anyhow::Result<()> {
        let echo = TcpListener::bind("127.0.0.1:0").await?;
        let target = echo.local_addr()?.to_string();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut reader, mut writer) = stream.split();
                    let _ = tokio::io::copy(&mut reader, &mut writer).await;
                });
            }
        });
        let proxy = LinkProxy::start(target).await?;
        let mut stream = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut stream).await?, b"ping");
        proxy.cut();
        let mut buffer = [0u8; 4];
        let read = stream.read(&mut buffer).await;
        assert!(matches!(read, Ok(0) | Err(_)), "the open connection ends: {read:?}");
        let mut refused = TcpStream::connect(proxy.addr()).await?;
        let _ = refused.write_all(b"ping").await;
        let read = refused.read(&mut buffer).await;
        assert!(matches!(read, Ok(0) | Err(_)), "a new connection is closed: {read:?}");
        proxy.heal();
        let mut healed = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut healed).await?, b"ping");
        Ok(())
    }

    /// A stalled link keeps its open connection and accepts new ones, but nothing passes and
    /// nothing is reset; after the heal the held bytes arrive on both.
    #[tokio::test]
    async fn a_stalled_link_is_half_open_until_healed() -> anyhow::Result<()> {
        let target = echo_server().await?;
        let proxy = LinkProxy::start(target).await?;
        let mut open = TcpStream::connect(proxy.addr()).await?;
        assert_eq!(round_trip(&mut open).await?, b"ping");
        proxy.stall();
        open.write_all(b"ping").await?;
        let mut later = TcpStream::connect(proxy.addr()).await?;
        later.write_all(b"ping").await?;
        let mut buffer = [0u8; 4];
        for stream in [&mut open, &mut later] {
            let quiet = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut buffer));
            assert!(quiet.await.is_err(), "nothing arrives and nothing is reset");
        }
        proxy.heal();
        for stream in [&mut open, &mut later] {
            stream.read_exact(&mut buffer).await?;
            assert_eq!(&buffer, b"ping");
        }
        Ok(())
    }

    async fn echo_server() -> anyhow::Result<String> {
        let echo = TcpListener::bind("127.0.0.1:0").await?;
        let target = echo.local_addr()?.to_string();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut reader, mut writer) = stream.split();
                    let _ = tokio::io::copy(&mut reader, &mut writer).await;
                });
            }
        });
        Ok(target)
    }

    async fn round_trip(stream: &mut TcpStream) -> anyhow::Result<Vec<u8>> {
        stream.write_all(b"ping").await?;
        let mut buffer = [0u8; 4];
        stream.read_exact(&mut buffer).await?;
        Ok(buffer.to_vec())
    }
}
