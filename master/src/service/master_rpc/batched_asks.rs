//! `GetTasks`: several trainers' asks in one call, each applied and answered as its own
//! `GetTask` would be (`task_calls::answer_ask`), their writes sharing one log entry. A
//! process walking several registrations at once (the Python loader) makes one call where it
//! made one per registration.

use super::task_calls::answer_ask;
use super::{MasterRpc, Reply};
use proto::master as pb;
use proto::master::get_task_answer::Answer;
use tonic::Status;

/// Metadata entries of an ask's refusal carried in its answer: the project's own
/// (`x-raftrain-leader`, `x-raftrain-refusal`, `x-raftrain-retry-after-ms`).
const CARRIED_METADATA_PREFIX: &str = "x-raftrain-";

pub(super) async fn get_tasks(
    rpc: &MasterRpc,
    request: tonic::Request<pb::GetTasksRequest>,
) -> Reply<pb::GetTasksReply> {
    let asks = request.into_inner().asks;
    let most = client::ASKS_TOGETHER_MAX as usize;
    if asks.is_empty() || asks.len() > most {
        return Err(Status::invalid_argument(format!(
            "asks: {} in one GetTasks; from 1 to {most} go together",
            asks.len()
        )));
    }
    rpc.require_leader()?;
    let together = asks.len();
    let mut answering = tokio::task::JoinSet::new();
    for (index, ask) in asks.into_iter().enumerate() {
        let rpc = rpc.clone();
        answering.spawn(async move { (index, answer_ask(&rpc, ask, together).await) });
    }
    let mut answers = vec![None; together];
    while let Some(joined) = answering.join_next().await {
        let (index, answer) = joined
            .map_err(|error| Status::internal(format!("GetTasks: an ask was lost: {error}")))?;
        answers[index] = Some(pb::GetTaskAnswer { answer: Some(answer_of(answer)) });
    }
    Ok(tonic::Response::new(pb::GetTasksReply { answers: answers.into_iter().flatten().collect() }))
}

/// An ask's answer as `GetTasks` and the ask stream carry it.
pub(super) fn answer_of(answer: Result<pb::GetTaskReply, Status>) -> Answer {
    match answer {
        Ok(reply) => Answer::Reply(reply),
        Err(status) => Answer::Refused(refusal(&status)),
    }
}

/// `status` as an ask's refusal, with the metadata a client acts on.
fn refusal(status: &Status) -> pb::AskRefusal {
    let metadata = status
        .metadata()
        .iter()
        .filter_map(|entry| match entry {
            tonic::metadata::KeyAndValueRef::Ascii(key, value) => Some((key, value)),
            tonic::metadata::KeyAndValueRef::Binary(..) => None,
        })
        .filter(|(key, _value)| key.as_str().starts_with(CARRIED_METADATA_PREFIX))
        .filter_map(|(key, value)| {
            let value = value.to_str().ok()?.to_string();
            Some(pb::RefusalEntry { key: key.as_str().to_string(), value })
        })
        .collect();
    pb::AskRefusal { code: status.code() as i32, message: status.message().to_string(), metadata }
}
