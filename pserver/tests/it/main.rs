//! Integration tests of the pserver crate: shards and their init phases, restore from damaged
//! checkpoints, and the gRPC service's refusals over a real socket.

mod restore;
mod service;
mod shard;
mod support;
