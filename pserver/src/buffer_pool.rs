//! `BufferPool`: the byte buffers pulls are encoded into, given back when h2 has written them
//! out. A pull of a large shard encodes megabytes a round; fresh buffers of that size came
//! from pages the allocator had returned to the kernel, and faulting them in again (zeroed)
//! cost about as much as the copy itself (`clear_page_erms` near the top of a profile of
//! `bench pserver`).

use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// A pool of byte buffers keeping at most `bytes_max` bytes of idle capacity.
#[derive(Debug)]
pub struct BufferPool {
    idle: Mutex<Idle>,
    bytes_max: usize,
}

#[derive(Debug, Default)]
struct Idle {
    buffers: Vec<Vec<u8>>,
    bytes: usize,
}

impl BufferPool {
    pub fn new(bytes_max: usize) -> Arc<Self> {
        Arc::new(Self { idle: Mutex::new(Idle::default()), bytes_max })
    }

    /// `values` as little-endian bytes in a pooled buffer; the buffer comes back to the pool
    /// when the last clone of the `Bytes` is dropped.
    pub fn encode(self: &Arc<Self>, values: &[f32]) -> Bytes {
        let mut buffer = self.take(values.len() * 4);
        crate::f32_bytes::encode_into(values, &mut buffer);
        Bytes::from_owner(Pooled { buffer, pool: self.clone() })
    }

    /// Idle bytes kept (for tests).
    pub fn idle_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// An empty buffer with room for `len` bytes: an idle one if it is large enough.
    fn take(&self, len: usize) -> Vec<u8> {
        let reused = {
            let mut idle = self.lock();
            let buffer = idle.buffers.pop();
            idle.bytes -= buffer.as_ref().map_or(0, Vec::capacity);
            buffer
        };
        match reused {
            Some(mut buffer) if buffer.capacity() >= len => {
                buffer.clear();
                buffer
            }
            _ => Vec::with_capacity(len),
        }
    }

    fn give_back(&self, buffer: Vec<u8>) {
        let mut idle = self.lock();
        if idle.bytes + buffer.capacity() <= self.bytes_max {
            idle.bytes += buffer.capacity();
            idle.buffers.push(buffer);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        // The idle list is a plain vector: a panic cannot leave it half-changed.
        self.idle.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A pooled buffer lent out as `Bytes`.
struct Pooled {
    buffer: Vec<u8>,
    pool: Arc<BufferPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give_back(std::mem::take(&mut self.buffer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::f32_bytes;

    /// A dropped buffer is reused for the next encoding, the pool keeps no more idle bytes
    /// than its bound, and what it encodes is the plain encoding.
    #[test]
    fn buffers_come_back_within_the_bound() {
        let pool = BufferPool::new(64);
        let first = pool.encode(&[1.0; 8]);
        assert_eq!(first.as_ref(), f32_bytes::encode(&[1.0; 8]));
        let address = first.as_ptr();
        drop(first);
        assert_eq!(pool.idle_bytes(), 32);
        let second = pool.encode(&[2.0; 4]);
        assert_eq!(second.as_ptr(), address, "the idle buffer was reused");
        assert_eq!(second.as_ref(), f32_bytes::encode(&[2.0; 4]));
        let (third, fourth) = (pool.encode(&[0.0; 12]), pool.encode(&[0.0; 12]));
        drop((second, third, fourth));
        assert!(pool.idle_bytes() <= 64, "{} idle bytes", pool.idle_bytes());
    }
}
