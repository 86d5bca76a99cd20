//! Deterministic simulation of the master group (tier 3): three masters of production code
//! (`ConsensusNode` with its batcher, `master::Replica` with the master service and the
//! leader's duties) running one job or two at once, and each job's trainers and pservers on
//! the production `MasterClient`, in one process, over a simulated network, disk and clock,
//! with every delay, drop, duplication, partition, pause, disk stall, clock skew, crash and
//! restart drawn from one seed.
//!
//! Code map:
//! - `rng`: the seeded random streams. `trace`: the hashed event trace of a run.
//! - `disk`, `flusher`, `log_store`, `snapshots`: the simulated disk (durable image, unflushed
//!   writes, snapshot files, slow and stalled states) and the `RaftLog` and `SnapshotStore`
//!   over it. `observer`: the tap recording what each node applied. `clock`: each master's
//!   and pserver's skewed, drifting clock.
//! - `network`: openraft's `RaftNetworkFactory` over the simulated network; `master_link`:
//!   the `MasterClient` dialer that calls a node's master service through it.
//! - `planted`: the production code's planted bugs, switched on for a run's thread (only with
//!   the `planted-bugs` feature).
//! - `cluster`: nodes, crashes, restarts. `client`: simulated trainers, walking their passes
//!   with the production `PassWalker` over `trainer_tasks`; `pserver`: pserver
//!   processes running the production slot keeper, reaching the masters through
//!   `recorded_master`, following what heartbeats ask through `pserver_asks`, and serving
//!   their shards on `data_plane`, which trainers pull from and push to. `job`: the run's jobs (one, or for some seeds two), each with its
//!   trainers and pservers. `dataset`: a job's dataset, a RecordIO file or (for some seeds)
//!   an index range, and what each task must cover. `operator`: (with `--operator`)
//!   checkpoints, cancels and then tries to restore the last job. `rendezvous_agents`:
//!   (with `--rendezvous`) agents racing on one rendezvous run's keys. `nemesis`: faults;
//!   `membership_nemesis`: (with `--membership`) removes, wipes, re-adds, grows and shrinks.
//!   `history`: invoke/ok/fail/info. `checker`: one file per invariant. `simulation`: one run
//!   (fault phase, heal, liveness phase). `runner`: many seeds.
//!
//! Architecture Invariant: nothing in a run reads the wall clock, the OS RNG or iterates a
//! `HashMap`; time is tokio's paused clock on a current-thread runtime.
//!
//! Determinism, and the openraft internals it relies on (0.9.25):
//! - openraft draws each election timeout from `rand::thread_rng()`; the simulator sets
//!   `election_timeout_max = election_timeout_min + 1`, so that draw is a constant, and draws
//!   `election_timeout_min` itself per node incarnation from the seed (distinct timeouts break
//!   election ties).
//! - openraft's replication backoff is an unbiased `tokio::select!`, whose branch order comes
//!   from tokio's per-runtime RNG, which cannot be seeded without `tokio_unstable`. Backoff only
//!   follows an `Unreachable` error, so the simulated network never returns one (a lost message
//!   is a network error after its delay), nor does the leader's commit gate
//!   (`consensus::durable_commits`: a commit not durable in time is a network error).
//! - A `tokio::sync::watch` wakes its waiters in an order drawn from that same RNG, so the
//!   consensus gates that several tasks wait on at once (the leader's durable log, the applied
//!   index linearizable reads wait for) wake them through one `Notify`, in the order they began
//!   to wait. `Raft::wait` waits on openraft's metrics watch; `consensus::handoff` still uses it
//!   to hold a leaving leader's writes, and those writes are released in a random order (a few
//!   seeds in a hundred do not replay).
//! - The trace is our own canonical text (messages, faults, client operations, applied entries
//!   with their payload hashes), hashed with FNV-1a; a test replays seeds and compares hashes.

pub mod checker;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod data_plane;
pub mod dataset;
pub mod disk;
pub mod flusher;
pub mod history;
pub mod job;
pub mod log_store;
pub mod master_link;
pub mod membership_nemesis;
pub mod nemesis;
pub mod network;
pub mod observer;
pub mod operator;
pub mod planted;
pub mod pserver;
pub mod pserver_asks;
pub mod recorded_master;
pub mod rendezvous_agents;
pub mod rng;
pub mod runner;
pub mod simulation;
pub mod snapshots;
pub mod trace;
pub mod trainer_tasks;

pub use config::{MasterSettings, PlantedBugs, SimulationConfig};
pub use simulation::{replay_command, run, SimulationReport};
