//! `raftrain snapshot restore FILE --data-dir DIR --id N --peers ...`: seeds one member of a
//! new group from a backup (`consensus::restore` says what the new identity protects).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use consensus::restore::{seed_member, SavedState};
use master::state::MasterState;

#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// The backup `snapshot save` wrote.
    file: PathBuf,
    /// The new member's data directory: must not exist, or be empty.
    #[arg(long)]
    data_dir: PathBuf,
    /// The new member's id (one of --peers).
    #[arg(long)]
    id: u64,
    /// Every member of the new group, `ID=HOST:PORT` comma-separated, as `raftrain master
    /// --peers` will be given.
    #[arg(long)]
    peers: String,
}

pub(super) fn run(args: &RestoreArgs) -> anyhow::Result<()> {
    let peers = consensus::parse_peers(&args.peers).context("--peers")?;
    let (header, state) = storage::backup_file::read(&args.file)?;
    // A state this build cannot open would stop every member at its first start.
    MasterState::decode(&state).with_context(|| {
        format!("{}: the state after the header does not decode", args.file.display())
    })?;
    let saved = SavedState { index: header.index, term: header.term, state: &state };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let log_id = runtime
        .block_on(seed_member(&args.data_dir, args.id, &peers, saved))
        .with_context(|| format!("restore into {}", args.data_dir.display()))?;
    println!(
        "restored {} into {} as node {} of {}: index {} (saved in term {}), the new group's \
         terms start at {}",
        args.file.display(),
        args.data_dir.display(),
        args.id,
        consensus::format_peers(&peers),
        header.index,
        header.term,
        log_id.leader_id.term
    );
    Ok(())
}
