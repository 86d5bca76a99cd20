//! Integration tests for the `raftrain` binary, run as real processes the way a user runs them.

mod command;
mod recordio;
