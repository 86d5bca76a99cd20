//! The master's gRPC service and the pieces only it uses: field conversions, the one
//! outcome-to-status mapping, the pserver watch stream and the status reply.

mod admission;
mod conversions;
mod dataset_report;
mod index_report;
mod job_rpc;
mod job_scope;
mod master_rpc;
mod proposer;
mod rendezvous_waits;
mod reported_steps;
mod slot_model;
mod snapshot_save;
mod status_mapping;
mod status_view;
mod watch;

pub use master_rpc::MasterRpc;
pub(crate) use proposer::Proposer;
