//! The consensus benchmark's application: `consensus::kv`'s key-value machine behind a gRPC
//! front (`service`: unary `Put`; `stream`: one `PutStream` of writes per client; `load`:
//! writers run inside the node, so the client's own cost drops out), run by
//! `bench consensus-node` processes.

mod load;
pub mod service;
mod stream;
#[cfg(test)]
mod tests;
