//! A durable, generic replicated log: openraft over sled, a tonic network, static bootstrap.
//!
//! The application implements [`StateMachine`]; [`ConsensusNode`] replicates opaque commands
//! into it. Nothing here knows what the commands mean.

mod batcher;
mod cluster_info;
mod codec;
pub mod config;
mod error;
mod flusher;
pub mod kv;
pub mod kv_service;
pub mod log_store;
pub mod network;
mod node;
mod service;
pub mod snapshot_file;
mod state_machine;
pub mod state_machine_store;
mod type_config;

pub use cluster_info::{cluster_info_reply, ClusterInfo, Member, Role};
pub use config::{parse_peers, ConfigError, NodeConfig};
pub use error::{format_peers, ShutdownError, StartError, WriteError};
pub use node::{ConsensusNode, COMMAND_BYTES_MAX};
pub use service::{incoming, serve, server_builder, RaftServer};
pub use state_machine::{RestoreError, StateMachine};
pub use type_config::{Commands, Entry, Metrics, Raft, Responses, TypeConfig};
