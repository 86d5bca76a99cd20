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
        "progress checkpoint {} of job {name:?}: pass {}, {} tasks done",
        taken.id, taken.pass, taken.done
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
            restored.pass, restored.todo
        );
        return Ok(());
    }
    println!(
        "job {name:?}: {} pservers reload their checkpoints for progress checkpoint {checkpoint}; \
         no task is handed out until they have",
        restored.reloading
    );
    wait_for_reloads(client, name, wait).await?;
    println!(
        "job {name:?} restored to progress checkpoint {checkpoint} with its model: pass {}",
        restored.pass
    );
    Ok(())
}

/// Returns once no pserver of `name` is left to reload; an error naming how many are after
/// `wait` (the restore stays under way). Why a holder cannot reload is printed once per slot
/// and reason; such a holder gives its slot up after a few attempts (its replacement restores
/// from the same file at its claim), so the restore does not wait for it for ever.
async fn wait_for_reloads(client: &MasterClient, name: &str, wait: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + wait;
    let mut told = std::collections::BTreeSet::new();
    loop {
        let jobs = client.list_jobs().await.context("list the jobs")?;
        let summary = jobs.jobs.iter().find(|summary| summary.job == name);
        let waiting = summary.map_or(0, |summary| summary.reloads_waiting);
        if waiting == 0 {
            return Ok(());
        }
        for (slot, reason) in
            summary.map(|summary| summary.reload_waits.clone()).unwrap_or_default()
        {
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
