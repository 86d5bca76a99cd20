//! `raftrain job checkpoint` and `job restore`: a progress checkpoint (the pass and its done
//! tasks) that the job's pservers back with checkpoints of their own, and a restore of the
//! data position with the model, waiting until every pserver reloaded it.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use client::MasterClient;

/// Between looks at how many pservers a restore still waits for.
const RELOAD_POLL_MS: u64 = 200;

/// Takes a progress checkpoint of `name` and prints it (one JSON object with `json`).
pub(super) async fn checkpoint(
    client: &MasterClient,
    name: &str,
    json: bool,
) -> anyhow::Result<()> {
    let taken = client.checkpoint_job(name).await?;
    if json {
        let value = serde_json::json!({
            "job": name, "checkpoint": taken.id, "pass": taken.pass, "done": taken.done,
            "pservers_asked": taken.pservers_asked,
        });
        println!("{value}");
        return Ok(());
    }
    println!(
        "progress checkpoint {} of job {name:?}: pass {} (counted from 1, as `job list` does), \
         {} tasks done",
        taken.id,
        u64::from(taken.pass) + 1,
        taken.done
    );
    if taken.pservers_asked {
        println!(
            "the job's pservers record their checkpoints for it within a heartbeat; `raftrain job \
             list` shows the newest progress checkpoint all of them have (model checkpoint)"
        );
    }
    Ok(())
}

/// Restores `name` to progress checkpoint `checkpoint` (the data only with `data_only`) and,
/// when pservers reload the model first, waits up to `wait` for them.
pub(super) async fn restore(
    client: &MasterClient,
    (name, checkpoint): (&str, u64),
    data_only: bool,
    wait: Duration,
) -> anyhow::Result<()> {
    let restored = client.restore_job(name, checkpoint, data_only).await?;
    if restored.reloading == 0 {
        let what = if data_only { " (the data position only)" } else { "" };
        println!(
            "job {name:?} restored to progress checkpoint {checkpoint}{what}: pass {}, {} tasks to do",
            u64::from(restored.pass) + 1,
            restored.todo
        );
        return Ok(());
    }
    println!(
        "job {name:?}: {} pservers reload their checkpoints for progress checkpoint {checkpoint}; \
         no task is handed out until they have",
        restored.reloading
    );
    wait_for_reloads(client, (name, restored.job_id), wait).await?;
    println!(
        "job {name:?} restored to progress checkpoint {checkpoint} with its model: pass {}",
        u64::from(restored.pass) + 1
    );
    Ok(())
}

/// Returns once no pserver of `name` (incarnation `job_id`; 0: the name's running one) is left
/// to reload; an error naming how many are after `wait` (the restore stays under way), or when
/// the job ended or was removed meanwhile (it was not restored). Why a holder cannot reload is
/// printed once per slot and reason; such a holder gives its slot up after a few attempts (its
/// replacement restores from the same file at its claim), so the restore does not wait for it
/// for ever.
async fn wait_for_reloads(
    client: &MasterClient,
    (name, job_id): (&str, u64),
    wait: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + wait;
    let mut told = std::collections::BTreeSet::new();
    loop {
        let jobs = client.list_jobs().await.context("list the jobs")?;
        let restored = |summary: &&client::JobSummary| match job_id {
            0 => summary.job == name && !summary.state.ended(),
            id => summary.job_id == id,
        };
        let Some(summary) = jobs.jobs.iter().find(restored) else {
            anyhow::bail!(
                "job {name:?} was removed while its pservers reloaded: it was not restored"
            );
        };
        if summary.state.ended() {
            anyhow::bail!(
                "job {name:?} {} while its pservers reloaded: it was not restored",
                summary.state.as_str()
            );
        }
        let waiting = summary.reloads_waiting;
        if waiting == 0 {
            return Ok(());
        }
        for (slot, reason) in summary.reload_waits.clone() {
            if told.insert((slot, reason.clone())) {
                eprintln!("slot {slot} cannot reload: {}", crate::status::escaped(&reason));
            }
        }
        if Instant::now() >= deadline {
            anyhow::bail!(
                "{waiting} pservers of job {name:?} have not reloaded after {} s; the restore \
                 stays under way (`raftrain job list` shows why a slot cannot reload; such a \
                 holder gives its slot up, and a new holder restores from the file). `raftrain \
                 job restore {name} --checkpoint ID --data-only` replaces it with a restore of \
                 the data only, `raftrain job cancel {name}` ends the job",
                wait.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(RELOAD_POLL_MS)).await;
    }
}
