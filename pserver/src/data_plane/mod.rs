//! The data plane: `PushGrads`, `PullParams` and `PushPull`, the calls that move parameters,
//! served and called without tonic's codec so a payload is copied as few times as the kernel
//! allows.
//!
//! With tonic's generated code each direction copied a payload about five times: f32 to bytes,
//! into prost's encode buffer, the kernel twice, h2's frames into tonic's decode buffer (and a
//! pull once more into a decoded vector). A tonic `Codec` cannot do better: its `EncodeBuf` and
//! `DecodeBuf` are tonic's own `BytesMut`, so a `Bytes` field is always copied in and the frames
//! always gathered. Here (on `platform::unary`) a push leaves the trainer as views of its own
//! gradient (`client/tensor_bytes.rs`), is checked and applied by the shard straight from the
//! HTTP/2 frames it arrived in (`payload.rs`), and a pull is copied once under each block's
//! lock and decoded once, from the frames, into the trainer's tensors.
//!
//! The wire is unchanged (gRPC framing, the `raftrain.pserver.v1` messages), so generated
//! clients and servers still interoperate, and nothing is skipped: the calls pass through the
//! same server layers (TLS, token, request budget, metrics) and then the same checks as any
//! other (lease and fence first, then the shard's whole-push validation).
//!
//! `server.rs` routes these calls to this module and every other to the generated service;
//! the messages' wire forms and the paths are the client crate's (`client::pserver::data_plane`),
//! which both ends share.

pub mod server;

pub use client::pserver::data_plane::{
    malformed, pull_message, push_message, PULL_PARAMS_PATH, PUSH_GRADS_PATH, PUSH_PULL_PATH,
    SMALL_MESSAGE_BYTES_MAX,
};
