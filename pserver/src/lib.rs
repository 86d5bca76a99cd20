//! Parameter servers: each holds a shard of every parameter (the blocks `placement` assigns to
//! its slot), applies the gradients trainers push with the job's optimizer, and checkpoints its
//! shard so that a replacement restores it.
//!
//! `placement`, `optimizer`, `layout` and `shard` are pure; `service` is the gRPC edge, and
//! `data_plane` serves its two calls that move parameters without tonic's codec buffers;
//! `slot_keeper` and `held_slot` hold the slot through the master (`slot_master`) on the
//! pserver's `clock`; `checkpointer` writes and records checkpoints; `run` wires them to one
//! port, where a `standby` answers until the slot is served. `client` is `PServerClient`, which trainers use.

pub mod block_state;
pub mod buffer_pool;
pub mod checkpointer;
pub mod clock;
pub mod config;
pub mod conversions;
pub mod data_plane;
pub mod f32_bytes;
pub mod held_slot;
pub mod job_dir;
pub mod layout;
pub mod limits;
pub mod optimizer;
pub mod payload;
pub mod placement;
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
pub use run::run;
pub mod client;
pub mod metrics;
