//! A simulated trainer for end-to-end tests: registers, then walks the job's passes with
//! `client::PassWalker`, finishing each task it gets until the job ends, recording every accepted
//! completion; and the single calls other tests make.

use client::{MasterClient, PassWalker, Session, Task, TaskData, TaskOutcome, Walked};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One accepted `TaskFinished`: (pass, task, epoch).
pub type Completion = (u32, u64, u64);

#[derive(Default)]
pub struct History {
    pub completions: Vec<Completion>,
    /// What each accepted completion covered, in the same order: (task, its data).
    pub covered: Vec<(u64, TaskData)>,
}

/// Writes a RecordIO file of `chunk_count` one-record chunks and returns its path.
pub fn write_dataset(dir: &std::path::Path, chunk_count: usize) -> String {
    use storage::recordio::{Writer, WriterOptions};
    let path = dir.join("dataset.recordio");
    let file = std::fs::File::create(&path).expect("create the dataset");
    let mut writer =
        Writer::new(file, WriterOptions { max_chunk_bytes: 1, ..WriterOptions::default() });
    for record in 0..chunk_count {
        writer.write_record(format!("record {record}").as_bytes()).expect("write a record");
    }
    writer.finish().expect("finish the dataset").sync_all().expect("sync the dataset");
    path.display().to_string()
}

pub async fn report_dataset(client: &MasterClient, path: &str, passes: u32) -> u64 {
    let sizes = client.report_dataset("e2e", &[path.to_string()], passes).await;
    sizes.expect("report the dataset").task_count
}

pub async fn register(client: &MasterClient, name: &str) -> u64 {
    client.register_trainer(name).await.expect("register a trainer").trainer_id
}

pub async fn get_task(client: &MasterClient, trainer: u64, pass: u32) -> TaskOutcome {
    client.get_task(trainer, pass).await.expect("get a task")
}

/// A task of `pass`, which the test knows is there to take.
pub async fn take_task(client: &MasterClient, trainer: u64, pass: u32) -> Task {
    match get_task(client, trainer, pass).await {
        TaskOutcome::Task(task) => task,
        other => panic!("expected a task, got {other:?}"),
    }
}

/// Reports a task finished; true when the master accepted it (its epoch was current).
pub async fn finish(client: &MasterClient, task_id: u64, epoch: u64) -> bool {
    client.task_finished(task_id, epoch).await.expect("report a task finished")
}

/// Consumes tasks until the job finishes, taking `work` per task.
pub async fn consume(
    client: MasterClient,
    name: String,
    work: Duration,
    history: Arc<Mutex<History>>,
) {
    let session = Session::register(Arc::new(client), name).await.expect("register a trainer");
    // A trainer declared lost while the group had no quorum for too long joins again.
    let mut walker = PassWalker::new(session).with_idle(Duration::from_millis(20));
    loop {
        match walker.next().await.expect("walk the job's passes") {
            Walked::Task(task) => {
                tokio::time::sleep(work).await;
                if finish(walker.source().master(), task.task_id, task.epoch).await {
                    let completion = (task.pass, task.task_id, task.epoch);
                    let mut history = history.lock().expect("history lock");
                    history.completions.push(completion);
                    history.covered.push((task.task_id, task.data));
                }
            }
            Walked::PassOver { .. } | Walked::PassRewound { .. } => {}
            Walked::Finished | Walked::Cancelled => return,
        }
    }
}

/// Starts `count` consumers (`consume`), named `{prefix}{index}`, each with its own client from
/// `client`, all recording into `history`.
pub fn spawn_consumers(
    count: usize,
    prefix: &str,
    work: Duration,
    history: &Arc<Mutex<History>>,
    client: impl Fn() -> MasterClient,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..count)
        .map(|index| {
            tokio::spawn(consume(client(), format!("{prefix}{index}"), work, history.clone()))
        })
        .collect()
}

/// Waits until `history` holds `count` completions; after a minute fails with `logs()`.
pub async fn completions_reach(
    history: &Arc<Mutex<History>>,
    count: usize,
    logs: impl Fn() -> String,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while history.lock().expect("history lock").completions.len() < count {
        let now = tokio::time::Instant::now();
        assert!(now < deadline, "no progress to {count} completions\n{}", logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
