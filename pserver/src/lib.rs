//! Parameter servers: each holds a shard of every parameter (the blocks `placement` assigns to
//! its slot), applies the gradients trainers push with the job's optimizer, and checkpoints its
//! shard so that a replacement restores it.
//!
//! `shard` is pure (`placement`, `layout`, the message limits and codecs are the client
//! crate's `client::pserver`, which both ends share; the update rules are the `optimizer`
//! crate's); `service` is the gRPC edge, and
//! `data_plane` serves its two calls that move parameters without tonic's codec buffers;
//! `slot_keeper` and `held_slot` hold the slot through the master (`slot_master`) on the
//! pserver's `clock`; `checkpointer` writes and records checkpoints; `run` wires them to one
//! port, where a `standby` answers until the slot is served. `PServerClient`, which trainers
//! use, is `client::pserver::PServerClient`: a trainer links no pserver.

pub mod block_state;
pub mod buffer_pool;
pub mod checkpointer;
pub mod clock;
pub mod config;
pub mod data_plane;
pub mod held_slot;
pub mod job_dir;
pub mod planted;
pub mod restore;
pub mod run;
pub mod service;
pub mod shard;
pub mod shard_cell;
pub mod shard_error;
pub mod slot_keeper;
pub mod slot_master;
pub mod standby;
pub mod status_mapping;

pub use config::PServerConfig;

// The wire contract both ends share, and the optimizers, are the client crate's and the
// optimizer crate's; re-exported under their old names so the server's own paths stay short.
pub use client::pserver::{conversions, f32_bytes, layout, limits, payload, placement};
pub use optimizer;
pub use run::run;
pub mod metrics;
