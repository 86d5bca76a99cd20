//! Generates the prost/tonic code from `proto/*.proto` with a vendored `protoc`, so a fresh
//! machine needs nothing but cargo.

/// The subset of etcd's API that `bench consensus` drives its etcd anchor with.
const ETCD_FILE: &str = "proto/etcd.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    std::env::set_var("PROTOC", protoc);
    let files = [
        "proto/example.proto",
        "proto/raft.proto",
        "proto/master.proto",
        "proto/kv.proto",
        "proto/pserver.proto",
    ];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let out_dir = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        // Every `bytes` field becomes `bytes::Bytes`: payloads are handed on without a copy.
        .bytes(".")
        // The encoded descriptors of every file, for gRPC server reflection (`grpcurl list`).
        .file_descriptor_set_path(out_dir.join("raftrain_descriptor.bin"))
        .compile_protos(&files, &["proto"])?;
    // etcd's messages, for the consensus benchmark's anchor only: kept out of the descriptor
    // set, so no raftrain port lists them.
    println!("cargo:rerun-if-changed={ETCD_FILE}");
    tonic_prost_build::configure().bytes(".").compile_protos(&[ETCD_FILE], &["proto"])?;
    Ok(())
}
