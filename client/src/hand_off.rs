//! A task hand-off in one write: `GetTask` carrying the receipts of tasks finished since the
//! last ask ([`MasterClient::finished_then_get_task`]; asks of several trainers gathered in
//! one `GetTasks` call, `ask_gather`), which a master of feature level 3
//! applies as one entry (each finish, then the ask). A group below level 3 refuses it before
//! applying anything (`hand-off-unsupported`), and a master of an older build answers the ask
//! alone; either way the receipts are then reported one by one and the ask made again, each a
//! call of its own, which the trainer cannot tell from the one write.

use super::ask_gather::Together;
use super::conversions::task_outcome;
use super::error::ClientError;
use super::master_client::{timed, MasterClient, ServiceClient};
use super::types::TaskOutcome;
use proto::master as pb;
use std::time::Duration;

/// The most finished-task receipts one ask carries: the master refuses more. A loader has at
/// most a few tasks reported but not yet answered per ask.
pub const FINISHED_PER_ASK_MAX: usize = 16;
/// The most asks a client says it sent at once (`GetTaskRequest.together`): the masters refuse
/// more. The leader holds an ask's write up to a millisecond for the others.
pub const ASKS_TOGETHER_MAX: u32 = 8;

/// What a hand-off met: per receipt, whether the finish was accepted (`false`: a newer
/// dispatch holds the task, or the job was cancelled), and the ask's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandOff {
    pub finished: Vec<bool>,
    pub outcome: TaskOutcome,
}

impl MasterClient {
    /// Reports `finished` (receipts `(task_id, epoch)`, at most [`FINISHED_PER_ASK_MAX`]) and
    /// asks for the next task of `pass` for the trainer, in one write where the masters can.
    /// `together`: the ask alone, one of several (at most [`ASKS_TOGETHER_MAX`]) the caller
    /// sends at once each in a call of its own, or gathered with them in one call; the masters
    /// put asks sent together in one write.
    pub async fn finished_then_get_task(
        &self,
        trainer_id: u64,
        pass: u32,
        finished: &[(u64, u64)],
        together: &Together,
    ) -> Result<HandOff, ClientError> {
        let count = together.count();
        if count > ASKS_TOGETHER_MAX {
            return Err(ClientError::InvalidArgument {
                call: "GetTask",
                message: format!(
                    "{count} asks sent at once; at most {ASKS_TOGETHER_MAX} share a write"
                ),
            });
        }
        if finished.len() > FINISHED_PER_ASK_MAX {
            return Err(ClientError::InvalidArgument {
                call: "GetTask",
                message: format!(
                    "{} finished tasks in one ask; at most {FINISHED_PER_ASK_MAX} go with one",
                    finished.len()
                ),
            });
        }
        let reply = match self.ask_reporting(trainer_id, pass, finished, together).await {
            Err(ClientError::HandOffUnsupported { .. }) => {
                return self.reported_one_by_one(trainer_id, pass, finished).await;
            }
            reply => reply?,
        };
        if reply.finished_accepted.len() == finished.len() {
            let finished = reply.finished_accepted.clone();
            return Ok(HandOff { finished, outcome: task_outcome(reply)? });
        }
        self.reported_one_by_one(trainer_id, pass, finished).await
    }

    /// One `GetTask` with the receipts, retried under one stamp: the first attempt of a
    /// gathered ask goes in its round's `GetTasks` call, any other alone.
    async fn ask_reporting(
        &self,
        trainer_id: u64,
        pass: u32,
        finished: &[(u64, u64)],
        together: &Together,
    ) -> Result<pb::GetTaskReply, ClientError> {
        let timeout = self.rpc_timeout();
        let receipts: Vec<pb::TaskReceipt> =
            finished.iter().map(|&(task_id, epoch)| pb::TaskReceipt { task_id, epoch }).collect();
        let gather = together.gather();
        self.write("GetTask", |mut service, stamp| {
            let request = pb::GetTaskRequest {
                stamp: Some(stamp),
                trainer_id,
                pass_index: pass,
                job: self.job().to_string(),
                finished: receipts.clone(),
                together: together.count(),
            };
            // The master the attempt goes to (this client's leader a moment ago).
            let addr = self.leader_hint().unwrap_or_default();
            async move {
                if let Some(gather) = gather {
                    let to = (service.clone(), addr.clone());
                    let gathered = gather.ask(to, request.clone(), timeout).await;
                    if let Some(answered) = gathered {
                        return answered.map(tonic::Response::new);
                    }
                }
                self.ask_alone(&mut service, &addr, request, timeout).await
            }
        })
        .await
    }

    /// One ask in no `GetTasks` call: on the client's ask stream to the master at `addr` (on
    /// `service`), or as a `GetTask` where that master has no stream.
    pub(crate) async fn ask_alone(
        &self,
        service: &mut ServiceClient,
        addr: &str,
        request: pb::GetTaskRequest,
        timeout: Duration,
    ) -> Result<tonic::Response<pb::GetTaskReply>, tonic::Status> {
        if let Some(answered) = self.asks.ask(service, addr, request.clone(), timeout).await {
            return answered.map(tonic::Response::new);
        }
        service.get_task(timed(request, timeout)).await
    }

    /// The masters refused the receipts, or answered the ask without them (an older build):
    /// each is reported on its own, then the trainer asks again (an older build's answer may
    /// have been a task it held, finished since).
    async fn reported_one_by_one(
        &self,
        trainer_id: u64,
        pass: u32,
        finished: &[(u64, u64)],
    ) -> Result<HandOff, ClientError> {
        let mut accepted = Vec::with_capacity(finished.len());
        for &(task_id, epoch) in finished {
            accepted.push(match self.task_finished(task_id, epoch).await {
                Err(ClientError::JobCancelled { .. }) => false,
                reported => reported?,
            });
        }
        let outcome = self.get_task(trainer_id, pass).await?;
        Ok(HandOff { finished: accepted, outcome })
    }
}
