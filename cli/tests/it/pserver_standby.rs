//! A pserver that serves no slot yet, against real processes (issue 35, item 20): a standby
//! answers health at once (its service NOT_SERVING) and refuses the data plane at once with
//! UNAVAILABLE saying it is a standby, where its port used to accept and never answer; and a
//! `PServerClient` for a job that does not exist says so, naming the job, instead of "0 of 0
//! slots held".

use std::sync::Arc;
use std::time::Duration;

use client::pserver::{PServerClient, PServerClientError};
use client::{ClientOptions, MasterClient};
use proto::pserver as pb;
use proto::pserver::p_server_service_client::PServerServiceClient;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use crate::master_group::MasterGroup;
use crate::pserver_processes::PServerProcesses;

const PSERVER_SERVICE: &str = "raftrain.pserver.v1.PServerService";
/// A bound on each call to the standby: it must answer at once, and before the fix it never
/// did. Generous: a bound, not a measurement.
const ANSWER_BOUND: Duration = Duration::from_secs(10);

/// Waits until pserver `index` logged `text`.
async fn wait_for_log(processes: &PServerProcesses, index: usize, text: &str) {
    for _ in 0..600 {
        if processes.log(index).contains(text) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("pserver {index} never logged {text:?}\n{}", processes.logs());
}

async fn connect(addr: &str) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("address")
        .connect_timeout(ANSWER_BOUND)
        .timeout(ANSWER_BOUND)
        .connect()
        .await
        .expect("connect to the standby")
}

/// A standby waiting for the only slot answers health (its service NOT_SERVING, the process
/// SERVING) and refuses `Status` and `PushGrads` with UNAVAILABLE naming itself a standby.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_answers_health_and_refuses_the_data_plane() {
    let group = MasterGroup::start(1, &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut processes = PServerProcesses::new(&group.addrs, dir.path(), 1);
    let holder = processes.spawn();
    wait_for_log(&processes, holder, "pserver slot claimed").await;
    let standby = processes.spawn();
    wait_for_log(&processes, standby, "all 1 pserver slots are held").await;
    let channel = connect(&processes.addrs[standby]).await;

    tracing::info!("--- health answers: the pserver service is NOT_SERVING");
    let mut health = HealthClient::new(channel.clone());
    for (service, expected) in
        [(PSERVER_SERVICE, ServingStatus::NotServing), ("", ServingStatus::Serving)]
    {
        let request = HealthCheckRequest { service: service.to_string() };
        let answer = health.check(request).await;
        let status = answer.map(|answer| answer.into_inner().status());
        assert!(
            status.as_ref().is_ok_and(|status| *status == expected),
            "health of {service:?}: {status:?}\n{}",
            processes.logs()
        );
    }

    tracing::info!("--- data-plane calls are refused at once: a standby");
    let mut pserver = PServerServiceClient::new(channel);
    let status = pserver.status(pb::StatusRequest {}).await.map(drop);
    let push = pserver.push_grads(pb::PushGradsRequest::default()).await.map(drop);
    for (call, answer) in [("Status", status), ("PushGrads", push)] {
        let refusal = answer.expect_err("a standby serves nothing");
        assert_eq!(refusal.code(), tonic::Code::Unavailable, "{call}: {refusal:?}");
        assert!(refusal.message().contains("standby"), "{call}: {refusal:?}");
    }
}

/// Waiting for the slots of a job the masters do not know ends, at the caller's deadline, in
/// an error that says the job does not exist and names it (not "0 of 0 slots are held").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pserver_client_for_a_missing_job_says_the_job_does_not_exist() {
    let group = MasterGroup::start(1, &[]);
    group.status().await;
    let job = "no-job-by-this-name";
    let options = ClientOptions {
        job: job.to_string(),
        call_deadline: Some(Duration::from_secs(60)),
        ..ClientOptions::default()
    };
    let master = MasterClient::new(&group.addrs, options).expect("valid master addresses");
    let client =
        PServerClient::new(Arc::new(master), 1, crate::pserver_processes::test_client_options());
    let waited = client.wait_for_slots(Some(Duration::from_secs(3))).await;
    let error = waited.expect_err("the job does not exist");
    assert!(matches!(error, PServerClientError::NoSuchJob { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(job) && message.contains("does not exist"), "{message}");
}

/// A pserver given no `--job` serves the group's only job, and keeps serving it once a second
/// job is submitted: its calls name the job it claimed, where they used to name none and be
/// refused ("the group runs 2 jobs: name one") until its slot was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pserver_of_the_only_job_keeps_it_once_another_is_submitted() {
    let group = MasterGroup::start(1, &["--pserver-lease-ms", "500"]);
    let masters = group.addrs.join(",");
    let submit = |name: &str| {
        let args = ["job", "submit", "--masters", &masters, "--name", name, "--index", "10"];
        crate::command::raftrain_ok(
            &[&args[..], &["--shard-size", "2", "--passes", "1"]].concat(),
            b"",
        );
    };
    submit("one");
    let dir = tempfile::tempdir().expect("temp");
    let mut pservers = PServerProcesses::new(&group.addrs, dir.path(), 1);
    pservers.spawn();
    wait_for_log(&pservers, 0, "pserver slot claimed").await;
    submit("two");
    // Several leases: a pserver whose heartbeats were refused would have lost its slot.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!pservers.log(0).contains("name one"), "{}", pservers.logs());
    assert_eq!(pservers.wait_exit(0, Duration::from_millis(1)), None, "{}", pservers.logs());
    let listed =
        crate::command::raftrain_ok(&["job", "list", "--json", "--masters", &masters], b"");
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("json");
    let one = listed["jobs"].as_array().expect("jobs").iter().find(|job| job["name"] == "one");
    assert_eq!(one.expect("job one")["pservers"], 1, "{listed}");
}
