//! Message and payload limits shared by the pserver service and `PServerClient`; they agree
//! with the layout's block limit (one block always fits one message).

use crate::pserver::layout::BLOCK_ELEMENTS_MAX;

/// The largest f32 payload of one request or reply; a single block up to
/// [`BLOCK_ELEMENTS_MAX`] elements always fits.
pub const PAYLOAD_BYTES_MAX: usize = 64 << 20;
/// The largest message either end accepts: the payload plus names and framing.
pub const MESSAGE_BYTES_MAX: usize = PAYLOAD_BYTES_MAX + (16 << 20);
/// A push of at most this many payload bytes is applied on the task that received it (tens of
/// microseconds), a larger one on a blocking thread.
pub const INLINE_PUSH_BYTES_MAX: usize = 256 << 10;
/// Idle pull buffers a pserver keeps for reuse (`BufferPool`): a round of requests in flight.
pub const PULL_BUFFER_BYTES_MAX: usize = 64 << 20;
/// What a client packs into one request before starting the next (several go in parallel).
pub const REQUEST_PAYLOAD_BYTES_TARGET: usize = 4 << 20;
/// Requests of one push or pull a client has in flight to one slot: enough to keep a
/// connection busy (16 MiB), few enough that a pull of a large shard does not make the
/// pserver encode all of it at once (its pull buffers are then reused, not faulted in anew).
pub const REQUESTS_IN_FLIGHT_PER_SLOT_MAX: usize = 4;

const _: () = assert!(BLOCK_ELEMENTS_MAX as usize * 4 <= PAYLOAD_BYTES_MAX);
/// HTTP/2 frame size both ends accept: 1 MiB frames instead of the 16 KiB default cut the
/// per-frame work of multi-MB payloads.
pub const FRAME_BYTES_MAX: u32 = 1 << 20;
