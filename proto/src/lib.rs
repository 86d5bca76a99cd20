//! Protocol buffer types for raftrain: the only crate that sees prost/tonic generated code.
//!
//! The generated modules nest as the protobuf packages do (`raftrain.master.v1` refers to
//! `raftrain.raft.v1`), and each package is also reachable by its short name:
//! `proto::example`, `proto::raft`, `proto::master`, `proto::kv`, `proto::pserver`. Conversions to and from
//! domain types live next to the services that use them, never here.

/// The generated code, one module per protobuf package.
#[allow(clippy::all, missing_docs)]
pub mod raftrain {
    pub mod example {
        pub mod v1 {
            tonic::include_proto!("raftrain.example.v1");
        }
    }
    pub mod raft {
        pub mod v1 {
            tonic::include_proto!("raftrain.raft.v1");
        }
    }
    pub mod master {
        pub mod v1 {
            tonic::include_proto!("raftrain.master.v1");
        }
    }
    pub mod kv {
        pub mod v1 {
            tonic::include_proto!("raftrain.kv.v1");
        }
    }
    pub mod pserver {
        pub mod v1 {
            tonic::include_proto!("raftrain.pserver.v1");
        }
    }
}

/// `etcdserverpb`: the few etcd v3 messages the consensus benchmark drives its etcd anchor with.
#[allow(clippy::all, missing_docs)]
pub mod etcd {
    tonic::include_proto!("etcdserverpb");
}

/// `raftrain.example.v1`: the training example stored in dataset records.
pub use raftrain::example::v1 as example;
/// `raftrain.kv.v1`: the key-value write service of the consensus benchmark.
pub use raftrain::kv::v1 as kv;
/// `raftrain.master.v1`: the master service trainers, pservers and `raftrain status` call.
pub use raftrain::master::v1 as master;
/// `raftrain.pserver.v1`: the parameter server service trainers call.
pub use raftrain::pserver::v1 as pserver;
/// `raftrain.raft.v1`: the Raft transport between master replicas.
pub use raftrain::raft::v1 as raft;

pub use prost;
pub use prost::Message;

/// Every raftrain `.proto` file as an encoded `FileDescriptorSet`, for gRPC server reflection:
/// `grpcurl` lists and calls raftrain's services without the `.proto` files.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("raftrain_descriptor");
