//! The data plane's same-run baseline in `bench pserver`: raw loopback TCP moving the bytes of
//! a push and a pull.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

const COPY_BYTES: usize = 1 << 20;

/// GB/s of `bytes` sent to a loopback peer and `bytes` sent back (a push and a pull), at
/// least three round trips.
pub(crate) fn raw_tcp_gbps(bytes: usize) -> anyhow::Result<f64> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let rounds = (3 * (400 << 20) / bytes.max(1)).clamp(3, 100);
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        let mut buffer = vec![0_u8; COPY_BYTES];
        for _ in 0..rounds {
            let mut left = bytes;
            while left > 0 {
                let read = stream.read(&mut buffer[..left.min(COPY_BYTES)])?;
                anyhow_free_eof(read)?;
                left -= read;
            }
            send(&mut stream, bytes, &buffer)?;
        }
        Ok(())
    });
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    let buffer = vec![7_u8; COPY_BYTES];
    let mut back = vec![0_u8; COPY_BYTES];
    let started = Instant::now();
    for _ in 0..rounds {
        send(&mut stream, bytes, &buffer)?;
        let mut left = bytes;
        while left > 0 {
            let read = stream.read(&mut back[..left.min(COPY_BYTES)])?;
            anyhow_free_eof(read)?;
            left -= read;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    echo.join().map_err(|_| anyhow::anyhow!("the echo thread panicked"))??;
    Ok(2.0 * rounds as f64 * bytes as f64 / seconds / 1e9)
}

fn send(stream: &mut TcpStream, bytes: usize, buffer: &[u8]) -> std::io::Result<()> {
    let mut left = bytes;
    while left > 0 {
        let part = left.min(buffer.len());
        stream.write_all(&buffer[..part])?;
        left -= part;
    }
    Ok(())
}

fn anyhow_free_eof(read: usize) -> std::io::Result<()> {
    if read == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the peer closed early",
        ));
    }
    Ok(())
}
