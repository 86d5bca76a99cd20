//! `raftrain status`: the cluster and a job, asked of the masters: the job `--job` names, or
//! the group's only one; with several jobs and no `--job`, a summary of every job. The job
//! comes from the leader (linearizable); every listed master, and every other member the group
//! knows, is also asked for its own view (term, last log and applied index), so a dead or
//! lagging replica shows as such, and without a quorum the members' own views are still shown,
//! marked as not linearizable. Exits with [`NO_MASTER_EXIT_CODE`] when no master answers at
//! all.

mod terminal_text;
mod view;

use std::time::Duration;

use clap::Args;
use client::{ClientOptions, MasterClient};
use platform::security::{Security, SecurityFiles};

pub(crate) use terminal_text::escaped;
use view::{snapshot_json, snapshot_text, Snapshot};

/// The exit status when not one of the given masters answers.
pub(crate) const NO_MASTER_EXIT_CODE: i32 = 3;
const WATCH_INTERVAL_MS: u64 = 1_000;

#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    /// Master addresses (any subset of the group), comma-separated.
    #[arg(long, env = "RAFTRAIN_MASTERS", value_delimiter = ',', required = true)]
    masters: Vec<String>,
    /// The job to show (without it: the group's only job, or a summary of every job).
    #[arg(long)]
    job: Option<String>,
    /// Print one JSON object instead of the human view (with --watch, one per refresh).
    #[arg(long)]
    json: bool,
    /// Refresh every second, redrawing in place, until Ctrl-C.
    #[arg(long)]
    watch: bool,
    /// Give up on the leader's answer after this many milliseconds.
    #[arg(long, default_value_t = 5_000)]
    timeout_ms: u64,
    #[command(flatten)]
    security: SecurityFiles,
}

pub(crate) fn run(args: &StatusArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let options = ClientOptions {
            call_deadline: Some(Duration::from_millis(args.timeout_ms)),
            security: Security::load(&args.security)?,
            ..ClientOptions::default()
        };
        let client = MasterClient::new(&args.masters, options)?;
        loop {
            let snapshot = fetch(&client, &args.masters, args.job.as_deref()).await?;
            if snapshot.status.is_none() && snapshot.members.iter().all(|(_, view)| view.is_err()) {
                let reasons: Vec<String> = snapshot
                    .members
                    .iter()
                    .filter_map(|(addr, view)| {
                        view.as_ref().err().map(|reason| format!("{addr}: {reason}"))
                    })
                    .collect();
                let error = format!("no master answered ({})", reasons.join("; "));
                if args.json {
                    // A script reading stdout gets a document saying so, not nothing.
                    let mut value = snapshot_json(&snapshot);
                    value["error"] = serde_json::json!(error);
                    println!("{value}");
                }
                eprintln!("error: {error}");
                std::process::exit(NO_MASTER_EXIT_CODE);
            }
            show(args, &snapshot);
            if !args.watch {
                return Ok(());
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(WATCH_INTERVAL_MS)) => {}
                () = crate::shutdown::signal_received() => return Ok(()),
            }
        }
    })
}

async fn fetch(
    client: &MasterClient,
    masters: &[String],
    job: Option<&str>,
) -> anyhow::Result<Snapshot> {
    let status = client.status_of(job.unwrap_or_default()).await;
    if let (Err(client::ClientError::NoSuchJob { .. }), Some(job)) = (&status, job) {
        // The leader answered: the name is wrong (or the job was removed), not the group.
        let refused = anyhow::anyhow!("no job named {job:?} in the group (`raftrain job list`)");
        return Err(refused.context(crate::exit_code::Configuration));
    }
    let status = status.ok();
    let (jobs, rendezvous) = match status {
        Some(_) => {
            let runs = client.list_rendezvous().await.ok().map(|(runs, _)| runs);
            (client.list_jobs().await.ok(), runs)
        }
        None => (None, None),
    };
    let mut members = Vec::with_capacity(masters.len());
    for addr in masters {
        members.push((addr.clone(), own_view(client, addr).await));
    }
    // The members the group knows beyond those listed: a healthy one not asked would show as
    // unreachable.
    for addr in unlisted_members(status.as_ref(), &members) {
        let view = own_view(client, &addr).await;
        members.push((addr, view));
    }
    Ok(Snapshot { status, members, jobs, one_job: job.is_some(), rendezvous })
}

/// Master `addr`'s own view of the group, or why it gave none.
async fn own_view(client: &MasterClient, addr: &str) -> Result<client::GroupView, String> {
    client.member_info(addr).await.map_err(|error| error.to_string())
}

/// The client addresses of the group's members (as the leader's answer, or else the most
/// advanced view asked, knows them) not among those `asked`.
fn unlisted_members(
    status: Option<&client::JobStatus>,
    asked: &[(String, Result<client::GroupView, String>)],
) -> Vec<String> {
    let known = status.map(|status| &status.group).or_else(|| view::most_advanced(asked));
    let members = known.map(|group| group.members.as_slice()).unwrap_or_default();
    let mut unlisted: Vec<String> = Vec::new();
    for member in members {
        let listed = asked.iter().any(|(addr, _)| *addr == member.addr);
        if !listed && !member.addr.is_empty() && !unlisted.contains(&member.addr) {
            unlisted.push(member.addr.clone());
        }
    }
    unlisted
}

fn show(args: &StatusArgs, snapshot: &Snapshot) {
    if args.json {
        println!("{}", snapshot_json(snapshot));
        return;
    }
    if args.watch {
        // Clear the screen and move home: the view redraws in place.
        print!("\u{1b}[2J\u{1b}[H");
    }
    print!("{}", snapshot_text(snapshot));
}
