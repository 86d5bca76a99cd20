//! Unary gRPC calls whose large messages skip tonic's codec buffers, for a data plane.
//!
//! tonic copies every message twice beyond the kernel: its encoder writes the message into
//! its own `BytesMut` (an `EncodeBuf`; a `Bytes` field is copied in, there is no way to hand
//! it on), and its decoder gathers the received DATA frames into another `BytesMut` before
//! decoding. For a payload of tens of megabytes those copies (and the fresh pages they fault
//! in) cost as much as the network. Here a message is a list of `Bytes` pieces handed to h2
//! as DATA frames ([`MessageWriter`], [`MessageBody`]), and a received message stays in the
//! frames it came in ([`Segments`], read with [`next_field`]). The wire format is unchanged
//! (gRPC framing, protobuf), so any gRPC client or server speaks to these, and the calls go
//! through the same channel and server layers as every other (TLS, token, budget, metrics).

mod client_call;
mod message_body;
mod protobuf;
mod read_message;
mod segments;
mod server_reply;

pub use client_call::call;
pub use message_body::MessageBody;
pub use protobuf::{
    length_delimited_len, next_field, small_message, varint_field_len, MessageWriter, WireError,
    WireValue, GRPC_PREFIX_BYTES,
};
pub use read_message::{read_message, Received};
pub use segments::{Parts, Segments};
pub use server_reply::{read_request, reply};
