//! `raftrain rendezvous`: the torchrun rendezvous runs the group holds (`--rdzv-backend=raftrain`),
//! listed for operators, and deleted when a run must start over.

use clap::{Args, Subcommand};
use client::MasterClient;

use crate::job::Connection;

#[derive(Debug, Args)]
pub(crate) struct RendezvousArgs {
    #[command(subcommand)]
    command: RendezvousCommand,
}

#[derive(Debug, Subcommand)]
enum RendezvousCommand {
    /// List the rendezvous runs: keys, bytes, and how long since an agent last wrote.
    List {
        #[command(flatten)]
        connection: Connection,
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Delete a run with its state and store keys, once its agents stopped (running agents lose
    /// their state and stop writing; an agent started later forms a world of its own).
    Delete {
        /// The run id (torchrun's --rdzv-id).
        run: String,
        #[command(flatten)]
        connection: Connection,
    },
}

pub(crate) fn run(args: &RendezvousArgs) -> anyhow::Result<()> {
    let connection = match &args.command {
        RendezvousCommand::List { connection, .. }
        | RendezvousCommand::Delete { connection, .. } => connection,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async { execute(&connection.client()?, &args.command).await })
}

async fn execute(client: &MasterClient, command: &RendezvousCommand) -> anyhow::Result<()> {
    match command {
        RendezvousCommand::List { json, .. } => {
            let (runs, idle_expiry_ms) = client.list_rendezvous().await?;
            match json {
                true => println!("{}", runs_json(&runs, idle_expiry_ms)),
                false => print!("{}", runs_table(&runs, idle_expiry_ms)),
            }
        }
        RendezvousCommand::Delete { run, .. } => {
            anyhow::ensure!(!run.is_empty(), "the run id is empty: name the run to delete");
            match client.delete_rendezvous(run).await? {
                true => println!("rendezvous run {run:?} deleted"),
                false => {
                    anyhow::bail!("no rendezvous run {run:?} (never made, deleted, or expired)")
                }
            }
        }
    }
    Ok(())
}

fn runs_table(runs: &[client::RendezvousRun], idle_expiry_ms: u64) -> String {
    if runs.is_empty() {
        return "no rendezvous runs\n".to_string();
    }
    let mut out = format!("{:<32} {:>6} {:>9} {:>12}  round\n", "run", "keys", "bytes", "idle");
    for run in runs {
        let idle = format!("{:.1} s", run.idle_ms as f64 / 1000.0);
        let name = crate::status::escaped(&run.run);
        let round = run.round.as_ref().map_or("-".to_string(), ToString::to_string);
        out += &format!("{name:<32} {:>6} {:>9} {idle:>12}  {round}\n", run.key_count, run.bytes);
    }
    out + &format!("(a run idle for {} s is removed)\n", idle_expiry_ms / 1000)
}

fn runs_json(runs: &[client::RendezvousRun], idle_expiry_ms: u64) -> serde_json::Value {
    let runs: Vec<_> = runs.iter().map(client::RendezvousRun::to_json).collect();
    serde_json::json!({ "runs": runs, "idle_expiry_ms": idle_expiry_ms })
}
