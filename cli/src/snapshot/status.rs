//! `raftrain snapshot status FILE`: checks a backup and prints what it holds.

use std::path::Path;

use anyhow::Context;
use master::state::{MasterState, StatusView};
use serde_json::json;
use storage::backup_file::BackupHeader;

/// Reads and checks `file`, decodes the state and prints it as text or JSON.
pub(super) fn run(file: &Path, json: bool) -> anyhow::Result<()> {
    let (header, state) = storage::backup_file::read(file)?;
    let state = MasterState::decode(&state).with_context(|| {
        format!("{}: the state after the header does not decode", file.display())
    })?;
    match json {
        true => println!("{}", as_json(&header, &state)),
        false => print!("{}", as_text(file, &header, &state)),
    }
    Ok(())
}

fn job_views(state: &MasterState) -> Vec<(u64, StatusView)> {
    state.jobs().map(|(id, job)| (id, job.status())).collect()
}

fn job_state(view: &StatusView) -> &'static str {
    match (view.job_cancelled, view.job_finished) {
        (true, _) => "cancelled",
        (false, true) => "finished",
        (false, false) => "running",
    }
}

fn as_json(header: &BackupHeader, state: &MasterState) -> serde_json::Value {
    let jobs: Vec<_> = job_views(state)
        .iter()
        .map(|(id, view)| {
            json!({
                "name": view.job.clone().unwrap_or_default(), "id": id, "state": job_state(view),
                "pass": view.pass, "passes": view.passes, "tasks": view.task_count,
                "todo": view.todo_count, "pending": view.pending_count,
                "done": view.done_count, "failed": view.failed_count,
            })
        })
        .collect();
    let runs: Vec<_> = state
        .rendezvous_runs()
        .iter()
        .map(|run| json!({"run": run.run, "keys": run.key_count, "bytes": run.bytes}))
        .collect();
    json!({
        "index": header.index, "term": header.term, "feature_level": header.feature_level,
        "size": header.length, "crc32": format!("{:#010x}", header.checksum),
        "jobs": jobs, "rendezvous_runs": runs,
    })
}

fn as_text(file: &Path, header: &BackupHeader, state: &MasterState) -> String {
    let mut out = format!("{}: {header}\n", file.display());
    let views = job_views(state);
    if views.is_empty() {
        out += "no jobs\n";
    }
    for (id, view) in &views {
        let name = view.job.as_deref().filter(|name| !name.is_empty()).unwrap_or("(unnamed)");
        out += &format!(
            "job {} (id {id}): {}, pass {}/{}, {} tasks: todo {}, pending {}, done {}, failed {}\n",
            crate::status::escaped(name),
            job_state(view),
            view.pass + 1,
            view.passes.max(1),
            view.task_count,
            view.todo_count,
            view.pending_count,
            view.done_count,
            view.failed_count
        );
    }
    for run in state.rendezvous_runs() {
        let name = crate::status::escaped(&run.run);
        out += &format!("rendezvous run {name}: {} keys, {} bytes\n", run.key_count, run.bytes);
    }
    out
}
