//! Protocol buffer types for raftrain: the only crate that sees prost/tonic generated code.
//!
//! Each package is a module named after its protobuf package. Conversions to and from
//! domain types live next to the services that use them, never here.

/// `raftrain.example.v1`: the training example stored in dataset records.
pub mod example {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("raftrain.example.v1");
}

/// `raftrain.raft.v1`: the Raft transport between master replicas.
pub mod raft {
    #![allow(clippy::all, missing_docs)]
    tonic::include_proto!("raftrain.raft.v1");
}

pub use prost;
pub use prost::Message;
