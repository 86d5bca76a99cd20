//! `LinkProxy`: one direction of one link between two masters, a TCP proxy the harness can cut
//! and heal. Master A dials master B's Raft port through the proxy for (A, B), so cutting it
//! drops A's traffic to B (and B's answers on those connections) without touching anything
//! else, as a real partition does.

use std::sync::Arc;

use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A running proxy; it stops when dropped.
pub struct LinkProxy {
    addr: String,
    cut: Arc<watch::Sender<bool>>,
    task: JoinHandle<()>,
}

impl LinkProxy {
    /// Listens on a free loopback port and forwards each connection to `target`.
    pub async fn start(target: String) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let (cut, _) = watch::channel(false);
        let cut = Arc::new(cut);
        let task = tokio::spawn(accept_loop(listener, target, cut.clone()));
        Ok(Self { addr, cut, task })
    }

    /// Where to dial instead of the target.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Cuts the link: open connections are reset and new ones closed at once, until healed.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn heal(&self) {
        self.cut.send_replace(false);
    }

    pub fn is_cut(&self) -> bool {
        *self.cut.borrow()
    }
}

impl Drop for LinkProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept_loop(listener: TcpListener, target: String, cut: Arc<watch::Sender<bool>>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let Ok((inbound, _)) = listener.accept().await else { continue };
        if *cut.borrow() {
            drop(inbound);
            continue;
        }
        connections.spawn(forward(inbound, target.clone(), cut.subscribe()));
        while connections.try_join_next().is_some() {}
    }
}

/// Copies both ways until either side closes or the link is cut.
async fn forward(mut inbound: TcpStream, target: String, mut cut: watch::Receiver<bool>) {
    let Ok(mut outbound) = TcpStream::connect(&target).await else { return };
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
        _ = cut.wait_for(|cut| *cut) => {
            // Reset rather than close, so neither end waits for a graceful end.
            let _ = inbound.set_zero_linger();
            let _ = outbound.set_zero_linger();
        }
    }
    let _ = inbound.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

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

    async fn round_trip(stream: &mut TcpStream) -> anyhow::Result<Vec<u8>> {
        stream.write_all(b"ping").await?;
        let mut buffer = [0u8; 4];
        stream.read_exact(&mut buffer).await?;
        Ok(buffer.to_vec())
    }
}
