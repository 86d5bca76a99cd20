//! The `raftrain` binary: parses flags and hands each subcommand to its crate.

fn main() {}
