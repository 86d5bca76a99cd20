//! `raftrain snapshot`: backups of the master group. `save` writes an online, consistent copy
//! of the whole state from the leader (whole or not at all, with a checksum); `status` checks
//! a file and prints what it holds; `restore` seeds one member's data directory of a new group
//! from a file.

mod restore;
mod status;

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::job::Connection;

#[derive(Debug, Args)]
pub(crate) struct SnapshotArgs {
    #[command(subcommand)]
    command: SnapshotCommand,
}

#[derive(Debug, Subcommand)]
enum SnapshotCommand {
    /// Save the whole state of the master group to FILE, online: the leader reads it
    /// linearizably (every write acknowledged before the save is in it) at a committed index
    /// the command prints, and nothing stops meanwhile. FILE is written whole or not at all
    /// (FILE.tmp, fsync, rename) with a checksum. One save at a time per master: a second is
    /// refused (exit 75, retryable).
    Save {
        /// Where to write the backup.
        file: PathBuf,
        #[command(flatten)]
        connection: Connection,
    },
    /// Check FILE (magic, version, length, checksum) and print what it holds: index, term,
    /// feature level, size, checksum, every job's queue and the rendezvous runs.
    Status {
        file: PathBuf,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Seed the empty data directory of one member of a NEW group from FILE (seed every
    /// member from the same file, then start each with `raftrain master --id N --peers ...
    /// --data-dir DIR`). The new group starts from the saved state as a new cluster identity:
    /// its terms start far above the saved one, so members of the old group are refused.
    /// Tasks finished after the save are handed out again (at least once, never skipped).
    Restore(restore::RestoreArgs),
}

pub(crate) fn run(args: &SnapshotArgs) -> anyhow::Result<()> {
    match &args.command {
        SnapshotCommand::Save { file, connection } => save(file, connection),
        SnapshotCommand::Status { file, json } => status::run(file, *json),
        SnapshotCommand::Restore(args) => restore::run(args),
    }
}

/// Asks the leader for the state and writes it durably; the file's checksum must match the
/// one the leader computed.
fn save(file: &Path, connection: &Connection) -> anyhow::Result<()> {
    let client = connection.client()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let saved = runtime.block_on(client.save_snapshot())?;
    let header = storage::backup_file::write(
        file,
        saved.index,
        saved.term,
        saved.feature_level,
        &saved.state,
    )
    .with_context(|| format!("write the backup {}", file.display()))?;
    if header.checksum != saved.checksum {
        // The file is whole but its bytes are not the leader's: remove it rather than keep a
        // backup that `status` would accept.
        let _ = std::fs::remove_file(file);
        anyhow::bail!(
            "the state received does not match the leader's checksum ({:#010x} here, {:#010x} \
             there); nothing was kept",
            header.checksum,
            saved.checksum
        );
    }
    println!("saved {} at {header}", file.display());
    Ok(())
}
