//! The master: a replicated task queue (pure state machine), its gRPC service, the leader's
//! duties, and `MasterClient`, which pservers and trainers use to reach whichever replica leads.
//!
//! `state` is the deterministic core and knows nothing of the rest; `replicated_state` plugs it
//! into `consensus`; `service` and `leader` run on every replica and act only while it leads;
//! `replica` starts them on one node and `run` serves that on a port.

pub mod clock;
mod config;
mod dashboard;
mod dataset_scan;
mod health;
mod join_record;
mod leader;
mod leader_clock;
mod leaving;
mod membership_duties;
mod metrics;
pub mod planted;
mod replica;
mod replicated_state;
mod run;
mod service;
pub mod state;

pub use config::MasterConfig;
pub use replica::Replica;
pub use replicated_state::ReplicatedState;
pub use run::run;
pub use service::MasterRpc;
