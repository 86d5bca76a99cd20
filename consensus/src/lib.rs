//! A durable, generic replicated log: openraft over sled, a tonic network, static bootstrap.
//!
//! The application implements [`StateMachine`]; [`ConsensusNode`] replicates opaque commands
//! into it. Nothing here knows what the commands mean.
//!
//! Code map:
//! - `node`: [`ConsensusNode`], the one type the application uses; `batcher` groups concurrent
//!   writes into one log entry (group commit), `batch_pace` says how long to wait for them,
//!   `leadership_ends` tells its in-flight entries when this node stops leading;
//!   `leadership` caches quorum confirmations of leadership (`confirm_leadership`);
//!   `handoff` hands leadership to a caught-up follower before a planned stop;
//!   `election_timer` starts a follower's election when its timer runs out, not at a tick.
//! - `log_store` (sled) and `flusher`: the Raft log, vote, committed and purged ids, and the
//!   bootstrap record; `durable_log` says how far it is durable, for the leader's parallel
//!   flush, and `durable_commits` wraps the network to announce only durable commits.
//!   `state_machine_store` and `snapshot_file`: the application state and its snapshot files.
//!   Both pass `openraft::testing::Suite`. `raft_log` (`RaftLog`,
//!   `NodeStorage`) and `snapshot_store` are the seams the simulation's disk plugs into;
//!   `apply_observer` is its tap on every applied entry.
//! - `network` (client) and `service` (server): the `RaftService` transport; `cluster_info`:
//!   the only conversions to and from protobuf. `rpc_handler` is where every received RPC
//!   goes; `rpc_bounds` refuses forged terms, log ids and snapshot offsets there.
//! - `kv`: a key-value machine, the smallest application, for tests and the consensus
//!   benchmark (whose gRPC front lives beside it in `cli`).
//!
//! Architecture invariants:
//! - Nothing is acknowledged before it is durable on a quorum: `save_vote` returns, and `append`
//!   calls back, only after sled's flush *and* an fsync of its database file, both on the one
//!   flusher thread; the one exception, a leader's own new entries, are acknowledged at once so
//!   they replicate while they are flushed, and then no entry is applied (no client answered)
//!   and no commit announced to a follower before it is durable on the leader too
//!   (`durable_log`, `durable_commits`).
//! - No snapshot is built from a `StateMachine::snapshot()` over `STATE_SNAPSHOT_BYTES_MAX`
//!   (the previous one is kept and nothing is purged), so every snapshot built fits the file,
//!   message and decode limits of every replica.
//! - No entry exceeds `log_store::ENTRY_BYTES_MAX` (sled would put it in a never-synced blob).
//! - A data directory that does not decode, or was bootstrapped as another node or group,
//!   refuses to start; a snapshot file is never silently skipped.
//! - No received RPC reaches openraft with a term more than `rpc_bounds::TERM_AHEAD_MAX` above
//!   this node's, a term or index near `u64::MAX`, or a snapshot chunk past the largest file: a
//!   forged message is refused and changes nothing.
//! - sled appears only in `log_store` and `flusher`; protobuf only in `service`, `network`,
//!   `cluster_info`, `kv_service` and `kv_stream`.

mod append_stream;
mod applied_index;
pub mod apply_observer;
mod batch_pace;
mod batcher;
mod cluster_info;
mod codec;
pub mod config;
mod core_stop;
mod disk_room;
pub mod durability_error;
mod durable_commits;
pub mod durable_log;
mod election_timer;
mod empty_log_guard;
mod error;
mod fifo_wait;
mod flush_seat;
mod flusher;
mod grpc_handoff;
pub mod handoff;
pub mod handoff_failure;
pub mod kv;
mod leader_changes;
mod leadership;
mod leadership_ends;
pub mod log_store;
mod log_store_closed;
mod member_levels;
mod membership;
mod membership_error;
pub mod network;
mod node;
mod peer_reach;
pub mod planted;
pub mod raft_log;
pub mod raft_metrics;
pub mod restore;
mod rpc_bounds;
mod rpc_handler;
mod service;
pub mod snapshot_file;
pub mod snapshot_store;
mod startup_sync;
mod state_machine;
pub mod state_machine_store;
mod step_up;
pub mod timeout_now_error;
mod type_config;

pub use batcher::TOGETHER_MAX;
pub use cluster_info::{cluster_info_reply, ClusterInfo, Member, Role};
pub use config::{parse_peers, ConfigError, NodeConfig};
pub use durable_log::{acknowledge_early, DurableLog, DurableWatch};
pub use error::{format_peers, ShutdownError, StartError, WriteError};
pub use grpc_handoff::GrpcHandoff;
pub use handoff::{Handoff, HandoffTransport, TimeoutNow};
pub use log_store_closed::{LogStoreClosed, OpenHandle};
pub use member_levels::{ask_all, GrpcMemberLevels, LevelFuture, MemberLevels};
pub use membership::{MemberStatus, Members, MEMBERS_MAX, MEMBER_ADDR_BYTES_MAX};
pub use membership_error::MembershipError;
pub use node::{ConsensusNode, COMMAND_BYTES_MAX};
pub use raft_log::{NodeStorage, PurgeGuard, RaftLog};
pub use rpc_handler::RpcHandler;
pub use service::{serve, RaftServer, RAFT_SERVICE};
pub use snapshot_file::STATE_SNAPSHOT_BYTES_MAX;
pub use state_machine::{ApplyError, RestoreError, StateMachine};
pub use type_config::{Commands, Entry, Metrics, Raft, Responses, ServerMetrics, TypeConfig};
