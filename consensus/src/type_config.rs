//! The openraft type configuration: opaque command and response bytes between `u64` nodes.

use std::io::Cursor;

use serde::{Deserialize, Serialize};

/// The payload of one log entry: commands, each bytes only the application's
/// [`crate::StateMachine`] understands, applied in order. Concurrent writes share an entry, so
/// one fsync on each node commits many of them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commands(pub Vec<Vec<u8>>);

/// What [`crate::StateMachine::apply`] answered for each command of an entry, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Responses(pub Vec<Vec<u8>>);

openraft::declare_raft_types!(
    /// The Raft types of raftrain: node ids are `u64`, a node is its address
    /// (`openraft::BasicNode`), snapshots travel as the bytes of a snapshot file.
    pub TypeConfig:
        D = Commands,
        R = Responses,
        NodeId = u64,
        Node = openraft::BasicNode,
);

/// The Raft handle of this crate's type configuration.
pub type Raft = openraft::Raft<TypeConfig>;

/// A log entry of this crate's type configuration.
pub type Entry = openraft::Entry<TypeConfig>;

/// Raft metrics as published by a node.
pub type Metrics = openraft::RaftMetrics<u64, openraft::BasicNode>;

/// The part of a node's Raft metrics about its role (vote, state, leader, membership): sent
/// only when one of those changes, where [`Metrics`] is sent at every turn of openraft's core
/// (several times for each entry), waking every task that waits on it.
pub type ServerMetrics = openraft::metrics::RaftServerMetrics<u64, openraft::BasicNode>;

/// Storage errors as openraft wants them.
pub type StorageError = openraft::StorageError<u64>;
