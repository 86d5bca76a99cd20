//! The master: a replicated task queue (pure state machine), its gRPC service and client.

pub mod state;
