//! Same-run baselines of `bench pserver`: raw loopback TCP moving the bytes of a push and a
//! pull, and a raw write+fsync and read of a checkpoint's bytes.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Instant;

use storage::checkpoint::{read_checkpoint, CheckpointDir, CheckpointHeader, ParamShape};
use storage::durable_file::write_durably;

use super::table::Table;

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

/// Checkpoint write and restore of `params` values (SGD: no state vectors) against a raw
/// write+fsync and read of the same number of bytes.
pub(crate) fn checkpoint_rows(root: &Path, params: u64) -> anyhow::Result<Table> {
    let dir = CheckpointDir::open(&root.join("checkpoint-bench"))?;
    let values = vec![0.25_f32; params as usize];
    let header = CheckpointHeader {
        slot: 0,
        slot_count: 1,
        block_elements: 65_536,
        generation: 1,
        step: 1,
        optimizer: Vec::new(),
        params: vec![ParamShape { name: "weight".into(), shape: vec![params] }],
    };
    let started = Instant::now();
    let mut writer = dir.writer(&header)?;
    for (index, block) in values.chunks(65_536).enumerate() {
        writer.write_block("weight", index as u32, 0, block, &[])?;
    }
    let written = writer.finish()?;
    let write_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let read = read_checkpoint(&written.path)?;
    let read_s = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        read.blocks.len() == values.len().div_ceil(65_536),
        "the checkpoint reads back whole"
    );
    drop(read);
    let raw = vec![0_u8; written.file_bytes as usize];
    let started = Instant::now();
    let raw_path = write_durably(dir.path(), "raw.bin", &raw)?;
    let raw_write_s = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let raw_read = std::fs::read(&raw_path)?;
    let raw_read_s = started.elapsed().as_secs_f64();
    anyhow::ensure!(raw_read.len() == raw.len(), "the raw file reads back whole");
    let mut table = Table::new(&[
        "checkpoint of",
        "bytes",
        "write+fsync s",
        "raw write+fsync s",
        "restore s",
        "raw read s",
    ]);
    let cells = [
        params.to_string(),
        written.file_bytes.to_string(),
        format!("{write_s:.2}"),
        format!("{raw_write_s:.2}"),
        format!("{read_s:.2}"),
        format!("{raw_read_s:.2}"),
    ];
    table.row(cells.to_vec());
    Ok(table)
}
