//! Readers that record what the cluster says about itself: linearizable status reads, each
//! master's own applied-state digest, and each pserver's slot while it serves.

use std::sync::Arc;
use std::time::Duration;

use client::{ClientOptions, MasterClient};
use platform::security::Security;
use proto::pserver::p_server_service_client::PServerServiceClient;
use tokio::sync::watch;

use crate::history::{History, OpKind, Operation, StatusSnapshot, Value};
use crate::workload::task_queue::{error_value, kind_of};

/// Status reads and pserver polls happen this often.
const OBSERVE_MS: u64 = 300;

/// The process ids the observers record under (trainers count up from 1).
pub const STATUS_PROCESS: u64 = u64::MAX - 1;
pub const PSERVER_PROCESS: u64 = u64::MAX - 2;
pub const DIGEST_PROCESS: u64 = u64::MAX - 3;

fn client(masters: &[String], deadline: Duration) -> anyhow::Result<MasterClient> {
    let options = ClientOptions {
        call_deadline: Some(deadline),
        rpc_timeout: Duration::from_millis(500).min(deadline),
        ..ClientOptions::default()
    };
    Ok(MasterClient::new(masters, options)?)
}

/// One linearizable status read, recorded.
pub async fn read_status(history: &History, masters: &[String]) -> anyhow::Result<()> {
    let client = client(masters, Duration::from_secs(2))?;
    history
        .call(STATUS_PROCESS, Operation::Status, async {
            match group_status(&client).await {
                Ok(snapshot) => (OpKind::Ok, Value::Status(snapshot), ()),
                Err(error) => (kind_of(&error), error_value(&error), ()),
            }
        })
        .await;
    Ok(())
}

/// One member list from the leader (`raftrain member list`), recorded: the voters, the
/// learners and whether a change is half done.
pub async fn read_members(history: &History, masters: &[String]) -> anyhow::Result<()> {
    let client = client(masters, Duration::from_secs(5))?;
    let process = crate::history::MEMBERSHIP_PROCESS;
    history
        .call(process, Operation::Members, async {
            match client.members().await {
                Ok(members) => {
                    let ids = |voter: bool| -> Vec<u64> {
                        let rows = members.members.iter().filter(|row| row.voter == voter);
                        rows.map(|row| row.id).collect()
                    };
                    let value = Value::Members {
                        leader: members.leader_id,
                        voters: ids(true),
                        learners: ids(false),
                        joint: members.joint,
                    };
                    (OpKind::Ok, value, ())
                }
                Err(error) => (kind_of(&error), error_value(&error), ()),
            }
        })
        .await;
    Ok(())
}

/// The group's task queues: the only job's status, or with several jobs the sum of each
/// job's (each read linearizably in turn, so every summed count still only grows, and the
/// queues still add up to the tasks).
async fn group_status(client: &MasterClient) -> Result<StatusSnapshot, client::ClientError> {
    let jobs = client.list_jobs().await?.jobs;
    if jobs.len() <= 1 {
        return Ok(snapshot(&client.status().await?));
    }
    let mut sum: Option<StatusSnapshot> = None;
    for summary in &jobs {
        let next = snapshot(&client.status_of(&summary.job).await?);
        sum = Some(match sum {
            None => next,
            Some(sum) => StatusSnapshot {
                term: next.term,
                applied_index: next.applied_index,
                pass: sum.pass + next.pass,
                todo: sum.todo + next.todo,
                pending: sum.pending + next.pending,
                done: sum.done + next.done,
                failed: sum.failed + next.failed,
                task_count: sum.task_count + next.task_count,
                dispatched: sum.dispatched + next.dispatched,
            },
        });
    }
    Ok(sum.expect("several jobs were read"))
}

fn snapshot(reply: &client::JobStatus) -> StatusSnapshot {
    StatusSnapshot {
        term: reply.group.term,
        applied_index: reply.group.last_applied_index,
        pass: reply.pass,
        todo: reply.todo,
        pending: reply.pending,
        done: reply.done,
        failed: reply.failed,
        task_count: reply.todo + reply.pending + reply.done + reply.failed,
        dispatched: reply.dispatched,
    }
}

/// Each master's own applied index and state digest, recorded; returns the applied indexes
/// read (`None` for a master that did not answer).
pub async fn read_digests(
    history: &History,
    masters: &[String],
) -> anyhow::Result<Vec<Option<u64>>> {
    let client = client(masters, Duration::from_secs(2))?;
    let mut indexes = Vec::new();
    for (index, addr) in masters.iter().enumerate() {
        let f = Operation::Digest { master: index as u64 + 1 };
        let (_, applied) = history
            .call(DIGEST_PROCESS, f, async {
                match client.member_digest(addr).await {
                    Ok((applied_index, digest)) => {
                        (OpKind::Ok, Value::Digest { applied_index, digest }, Some(applied_index))
                    }
                    Err(error) => (kind_of(&error), error_value(&error), None),
                }
            })
            .await;
        indexes.push(applied);
    }
    Ok(indexes)
}

/// Asks every pserver what it serves, recording those that answer (a pserver answers only
/// while it holds a confirmed slot); a refusal or silence is recorded as a failure.
pub async fn poll_pservers(history: &History, pservers: &[(String, String)]) {
    for (index, (addr, job)) in pservers.iter().enumerate() {
        let f = Operation::PserverStatus { pserver: index as u64 };
        history
            .call(PSERVER_PROCESS, f, async {
                match pserver_slot(addr).await {
                    Ok((slot, generation)) => {
                        let job = job.clone();
                        (OpKind::Ok, Value::Slot { job, slot, generation, serving: true }, ())
                    }
                    Err(status) => {
                        (OpKind::Fail, Value::Error { message: status.message().to_string() }, ())
                    }
                }
            })
            .await;
    }
}

async fn pserver_slot(addr: &str) -> Result<(u32, u64), tonic::Status> {
    let security = Security::default();
    let endpoint = platform::endpoint(&security, addr, std::time::Duration::from_secs(1))
        .map_err(|error| tonic::Status::invalid_argument(error.to_string()))?;
    let mut client = PServerServiceClient::new(security.channel(&endpoint));
    let mut request = tonic::Request::new(proto::pserver::StatusRequest {});
    request.set_timeout(Duration::from_millis(500));
    let reply = client.status(request).await?.into_inner();
    Ok((reply.slot, reply.generation))
}

/// Status reads and pserver polls every `OBSERVE_MS` until stop.
pub async fn observe(
    history: Arc<History>,
    masters: Vec<String>,
    pservers: Vec<(String, String)>,
    mut stop: watch::Receiver<bool>,
) {
    // Each read starts at the next master, as a user's `raftrain status --masters X` would: a
    // follower must send it on to the leader, never answer from its own, possibly stale, state.
    for turn in 0.. {
        if *stop.borrow() {
            break;
        }
        let first = std::slice::from_ref(&masters[turn % masters.len()]);
        let _ = read_status(&history, first).await;
        poll_pservers(&history, &pservers).await;
        let _ =
            tokio::time::timeout(Duration::from_millis(OBSERVE_MS), stop.wait_for(|stop| *stop))
                .await;
    }
}
