//! Integration tests for the `raftrain` binary, run as real processes the way a user runs them.

mod bench_consensus;
mod command;
mod dashboard;
mod data_root;
mod demo;
mod help;
mod hostile_input;
mod logging;
mod manifests;
mod master_failover;
mod master_group;
mod master_hardening;
mod master_large_job;
mod master_lost_disk;
mod master_pause;
mod master_service;
mod metrics;
mod pserver_processes;
mod pserver_replacement;
mod recordio;
mod security;
mod status;
mod synth;
mod task_consumer;
mod training;
mod training_job;
