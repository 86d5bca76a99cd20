//! Integration tests for the `raftrain` binary, run as a real process the way a user runs it.

mod command;
mod recordio;
