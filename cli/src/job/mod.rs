//! `raftrain job`: the group's jobs — submit one from flags or a TOML spec, list them, cancel
//! one, and record or restore a job's progress (a progress checkpoint: its pass and done
//! tasks, one replicated entry, whose id a model checkpoint can carry).

mod progress;
mod spec;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use client::{ClientOptions, JobList, MasterClient};
use platform::security::{Security, SecurityFiles};

use spec::SpecFields;

use crate::exit_code::Configuration;

#[derive(Debug, Args)]
pub(crate) struct JobArgs {
    #[command(subcommand)]
    command: JobCommand,
}

/// How every job (and rendezvous) subcommand reaches the masters.
#[derive(Debug, Args)]
pub(crate) struct Connection {
    /// Master addresses (any subset of the group), comma-separated.
    #[arg(long, env = "RAFTRAIN_MASTERS", value_delimiter = ',', required = true)]
    masters: Vec<String>,
    /// Give up when no leader answered within this many milliseconds.
    #[arg(long, default_value_t = 30_000)]
    timeout_ms: u64,
    #[command(flatten)]
    security: SecurityFiles,
}

#[derive(Debug, Subcommand)]
enum JobCommand {
    /// Submit a job: its dataset, passes and queue policy (flags, or --spec FILE). Submitting
    /// the same spec again changes nothing; another spec under a name in use is refused. A
    /// job that ended (finished or cancelled) is not trained again unless --restart.
    Submit {
        #[command(flatten)]
        connection: Connection,
        /// A TOML file with the same fields as the flags (name, dataset or index and
        /// shard-size, passes, chunks-per-task, ...).
        #[arg(long, conflicts_with_all = ["name", "dataset", "index", "shard_size", "passes"])]
        spec: Option<PathBuf>,
        #[command(flatten)]
        fields: SpecFields,
        /// Train again: if the job of this name ended (finished or cancelled), start a new
        /// incarnation of it (a new job id) with this spec, which may differ from the old
        /// one's; while it runs, the submit joins it as usual. Never cancels a running job.
        #[arg(long)]
        restart: bool,
    },
    /// List the group's jobs: running, finished and cancelled ones not yet removed.
    List {
        #[command(flatten)]
        connection: Connection,
        /// One JSON object instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a job: its trainers and pservers stop (exit 0); it is removed after the
    /// masters' --job-retention-secs.
    Cancel {
        name: String,
        #[command(flatten)]
        connection: Connection,
    },
    /// Record the job's progress (pass and done tasks); prints the checkpoint's id. The job's
    /// pservers record checkpoints of their own under the same id.
    Checkpoint {
        #[command(flatten)]
        connection: Connection,
        name: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Put the job back to a progress checkpoint: the pservers' model first (their
    /// checkpoints for it; no task is handed out until every pserver reloaded), then the
    /// queue: the tasks done after it are done again (at least once).
    Restore {
        #[command(flatten)]
        connection: Connection,
        name: String,
        #[arg(long)]
        checkpoint: u64,
        /// Restore the data position only and leave the pservers' model as it is (also the
        /// way out of a restore whose pservers cannot reload).
        #[arg(long)]
        data_only: bool,
        /// Wait this many seconds for the pservers to reload.
        #[arg(long, default_value_t = 60)]
        wait_secs: u64,
    },
}

pub(crate) fn run(args: &JobArgs) -> anyhow::Result<()> {
    let connection = match &args.command {
        JobCommand::Submit { connection, .. }
        | JobCommand::List { connection, .. }
        | JobCommand::Cancel { connection, .. }
        | JobCommand::Checkpoint { connection, .. }
        | JobCommand::Restore { connection, .. } => connection,
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async { execute(&connection.client()?, &args.command).await })
}

impl Connection {
    /// A client of the masters these flags name.
    pub(crate) fn client(&self) -> anyhow::Result<MasterClient> {
        let options = ClientOptions {
            call_deadline: Some(Duration::from_millis(self.timeout_ms)),
            security: Security::load(&self.security)?,
            ..ClientOptions::default()
        };
        Ok(MasterClient::new(&self.masters, options)?)
    }
}

async fn execute(client: &MasterClient, command: &JobCommand) -> anyhow::Result<()> {
    // An unset shell variable (`raftrain job cancel "$JOB"`) must not mean the only job.
    if let JobCommand::Cancel { name, .. }
    | JobCommand::Checkpoint { name, .. }
    | JobCommand::Restore { name, .. } = command
    {
        client::require_job_name(name).map_err(anyhow::Error::msg).context(Configuration)?;
    }
    match command {
        JobCommand::Submit { spec, fields, restart, .. } => {
            let mut spec = match spec {
                Some(path) => SpecFields::from_file(path).and_then(|fields| {
                    fields.to_spec().with_context(|| format!("job spec {}", path.display()))
                }),
                None => fields.to_spec(),
            }
            .context(Configuration)?;
            spec.restart = *restart;
            let sizes = client.submit_job(&spec).await?;
            println!(
                "job {:?} submitted: {} tasks ({} chunks, {} records)",
                spec.job, sizes.task_count, sizes.chunk_count, sizes.record_count
            );
        }
        JobCommand::List { json, .. } => {
            let jobs = client.list_jobs().await?;
            match json {
                true => println!("{}", jobs.to_json()),
                false => print!("{}", jobs_table(&jobs)),
            }
        }
        JobCommand::Cancel { name, .. } => {
            client.cancel_job(name).await?;
            println!("{}", cancelled_line(client, name).await);
        }
        JobCommand::Checkpoint { name, json, .. } => {
            progress::checkpoint(client, name, *json).await?
        }
        JobCommand::Restore { name, checkpoint, data_only, wait_secs, .. } => {
            let wait = Duration::from_secs(*wait_secs);
            progress::restore(client, (name, *checkpoint), *data_only, wait).await?
        }
    }
    Ok(())
}

/// The text table of `job list` (and of `status` with several jobs).
pub(crate) fn jobs_table(jobs: &JobList) -> String {
    if jobs.jobs.is_empty() {
        return "no jobs\n".to_string();
    }
    let mut out = format!(
        "{:<24} {:<9} {:>9} {:>17} {:>8} {:>8} {:>8}  {}\n",
        "job", "state", "pass", "done/tasks", "failed", "trainers", "pservers", "checkpoint"
    );
    for summary in &jobs.jobs {
        let name =
            crate::status::escaped(if summary.job.is_empty() { "(unnamed)" } else { &summary.job });
        out += &format!(
            "{:<24} {:<9} {:>9} {:>17} {:>8} {:>8} {:>8}  {}\n",
            name,
            summary.state.as_str(),
            format!("{}/{}", summary.pass + 1, summary.passes.max(1)),
            format!("{}/{}", summary.done, summary.task_count),
            summary.failed,
            summary.trainers,
            summary.pservers,
            checkpoint_column(summary),
        );
    }
    out
}

/// The newest progress checkpoint, the newest one every pserver backs with its own, and a
/// restore waiting for pservers to reload.
fn checkpoint_column(job: &client::JobSummary) -> String {
    let mut column = match (job.newest_checkpoint, job.newest_model_checkpoint) {
        (None, _) => "-".to_string(),
        (Some(newest), Some(model)) if model == newest => format!("{newest} (with model)"),
        (Some(newest), Some(model)) => format!("{newest} (with model: {model})"),
        (Some(newest), None) if job.newest_checkpoint_data_only => format!("{newest} (data only)"),
        (Some(newest), None) => newest.to_string(),
    };
    if job.reloads_waiting > 0 {
        column += &format!(", restoring: {} pservers reloading", job.reloads_waiting);
    }
    for (slot, reason) in &job.reload_waits {
        column += &format!("; slot {slot} cannot reload: {}", crate::status::escaped(reason));
    }
    column
}

/// What a cancel of `name` did, as the job list says after it: a job that had finished stays
/// finished (a cancel changes nothing, and its pservers serve the model until it is removed).
async fn cancelled_line(client: &MasterClient, name: &str) -> String {
    let listed = client.list_jobs().await.ok();
    let newest =
        listed.as_ref().and_then(|list| list.jobs.iter().rev().find(|job| job.job == name));
    match newest.map(|job| job.state) {
        Some(client::JobPhase::Finished) => format!(
            "job {name:?} had already finished: nothing was cancelled (its pservers serve the \
             model until the job is removed; stop them yourself)"
        ),
        _ => format!("job {name:?} cancelled"),
    }
}
