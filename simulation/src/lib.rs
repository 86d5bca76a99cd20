//! Deterministic simulation of the master group (tier 3): three openraft nodes running the real
//! master state machine in one process, over a simulated network, disk and clock, with every
//! delay, drop, duplication, partition, crash and restart drawn from one seed.
//!
//! Code map:
//! - `rng`: the seeded random streams. `trace`: the hashed event trace of a run.
//! - `disk`, `flusher`, `log_store`: the simulated disk (durable image + unflushed writes) and
//!   the storage-v2 log store over it. `state_machine_store`, `machine`: the in-memory state
//!   machine that records what it applied, and the master machine (or a planted bug).
//! - `network`: openraft's `RaftNetworkFactory` over the simulated network.
//!
//! Architecture Invariant: nothing in a run reads the wall clock, the OS RNG or iterates a
//! `HashMap`; time is tokio's paused clock on a current-thread runtime.

pub mod checker;
pub mod client;
pub mod cluster;
pub mod config;
pub mod disk;
pub mod flusher;
pub mod history;
pub mod log_store;
pub mod machine;
pub mod nemesis;
pub mod network;
pub mod rng;
pub mod runner;
pub mod simulation;
pub mod state_machine_store;
pub mod trace;

pub use config::{PlantedBugs, SimulationConfig};
pub use simulation::{run, SimulationReport};
