//! A simulated trainer for end-to-end tests: registers, then fetches and finishes tasks through
//! `MasterClient` until the job finishes, recording every accepted completion.

use master::client::MasterClient;
use proto::master::get_task_reply::Outcome;
use proto::master::{
    GetTaskRequest, RegisterTrainerRequest, ReportDatasetRequest, TaskFinishedRequest,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One accepted `TaskFinished`: (pass, task, epoch).
pub type Completion = (u32, u64, u64);

#[derive(Default)]
pub struct History {
    pub completions: Vec<Completion>,
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
    let reply = client
        .write("ReportDataset", |mut service, stamp| {
            let request = ReportDatasetRequest {
                stamp: Some(stamp),
                job: "e2e".into(),
                patterns: vec![path.to_string()],
                passes,
            };
            async move { service.report_dataset(request).await }
        })
        .await
        .expect("report the dataset");
    reply.task_count
}

pub async fn register(client: &MasterClient, name: &str) -> u64 {
    let reply = client
        .write("RegisterTrainer", |mut service, stamp| {
            let request = RegisterTrainerRequest { stamp: Some(stamp), name: name.to_string() };
            async move { service.register_trainer(request).await }
        })
        .await
        .expect("register a trainer");
    reply.trainer_id
}

pub async fn get_task(
    client: &MasterClient,
    trainer: u64,
    pass: u32,
) -> proto::master::GetTaskReply {
    client
        .write("GetTask", |mut service, stamp| {
            let request = GetTaskRequest { stamp: Some(stamp), trainer_id: trainer, pass };
            async move { service.get_task(request).await }
        })
        .await
        .expect("get a task")
}

/// Reports a task finished; true when the master accepted it (its epoch was current).
pub async fn finish(client: &MasterClient, task: u64, epoch: u64) -> bool {
    let reply = client
        .write("TaskFinished", |mut service, stamp| {
            let request = TaskFinishedRequest { stamp: Some(stamp), task_id: task, epoch };
            async move { service.task_finished(request).await }
        })
        .await
        .expect("report a task finished");
    reply.accepted
}

/// Consumes tasks until the job finishes, taking `work` per task.
pub async fn consume(
    client: MasterClient,
    name: String,
    work: Duration,
    history: Arc<Mutex<History>>,
) {
    let mut trainer = register(&client, &name).await;
    let mut pass = 0;
    loop {
        let reply = get_task(&client, trainer, pass).await;
        match Outcome::try_from(reply.outcome).expect("a known outcome") {
            Outcome::Task => {
                let task = reply.task.expect("a TASK reply carries the task");
                tokio::time::sleep(work).await;
                if finish(&client, task.task_id, task.epoch).await {
                    history.lock().expect("history lock").completions.push((
                        task.pass,
                        task.task_id,
                        task.epoch,
                    ));
                }
            }
            Outcome::PassBefore | Outcome::PassAfter => pass = reply.current_pass,
            Outcome::NoMoreAvailable | Outcome::NoDataset => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            // Declared lost while the group had no quorum for too long: join again.
            Outcome::UnknownTrainer => trainer = register(&client, &name).await,
            Outcome::JobFinished => return,
            Outcome::Unspecified => panic!("the master answered GetTask without an outcome"),
        }
    }
}
