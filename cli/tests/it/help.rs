//! Every flag of every server subcommand has an environment twin (`RAFTRAIN_...`), as etcd's and
//! torchrun's do, so a deployment can configure a process without building a command line.

use crate::command::raftrain_ok;

/// The option blocks of a `--help` text: each starts at a line whose first word is a flag.
fn option_blocks(help: &str) -> Vec<String> {
    let mut blocks: Vec<String> = Vec::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("--")
            || (trimmed.starts_with('-') && trimmed.chars().nth(1).is_some_and(char::is_alphabetic))
        {
            blocks.push(String::new());
        }
        if let Some(block) = blocks.last_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

#[test]
fn every_server_flag_has_an_environment_twin() {
    for subcommand in ["master", "pserver", "trainer"] {
        let help = raftrain_ok(&[subcommand, "--help"], b"");
        let blocks = option_blocks(&help);
        assert!(blocks.len() > 5, "{subcommand}: {help}");
        for block in blocks {
            if block.contains("--help") || block.contains("--version") {
                continue;
            }
            assert!(
                block.contains("[env: RAFTRAIN_"),
                "{subcommand}: no environment twin for\n{block}"
            );
        }
    }
}
