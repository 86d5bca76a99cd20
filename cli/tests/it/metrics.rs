//! `raftrain master --metrics-listen`: Prometheus text on `GET /metrics` from a real process,
//! with the Raft gauges and the job's queues; other requests get a clear 4xx.

use crate::master_group::{free_loopback_addr, MasterGroup};
use crate::task_consumer::{report_dataset, write_dataset};
use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

/// Sends `request` to `addr` and returns the whole response; retries the connect while the
/// master starts.
pub fn http(addr: &str, request: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut stream = loop {
        match std::net::TcpStream::connect(addr) {
            Ok(stream) => break stream,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(error) => panic!("connect to the metrics address {addr}: {error}"),
        }
    };
    stream.write_all(request.as_bytes()).expect("send the request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read the response");
    response
}

/// The value of the sample `name` in a metrics response.
pub fn sample(response: &str, name: &str) -> f64 {
    let line = response
        .lines()
        .find(|line| line.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no sample {name} in:\n{response}"));
    line.split_whitespace().nth(1).and_then(|value| value.parse().ok()).expect("a number")
}

/// A one-master group serves its Raft and job gauges; a bad path or method is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_serves_raft_and_job_gauges() {
    let metrics_addr = free_loopback_addr();
    let group = MasterGroup::start(1, &["--metrics-listen", &metrics_addr]);
    let client = group.client();
    let dataset = write_dataset(group.dir.path(), 5);
    report_dataset(&client, &dataset, 2).await;

    let addr = metrics_addr.clone();
    let get = "GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    let response = tokio::task::spawn_blocking(move || http(&addr, get)).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
    assert!(
        response.to_lowercase().contains("content-type: text/plain; version=0.0.4"),
        "{response}"
    );
    assert!(response.contains("# TYPE raftrain_raft_term gauge"), "{response}");
    assert_eq!(sample(&response, "raftrain_raft_is_leader"), 1.0);
    assert!(sample(&response, "raftrain_raft_term") >= 1.0);
    assert_eq!(sample(&response, "raftrain_master_dataset_tasks"), 5.0);
    assert_eq!(sample(&response, "raftrain_master_tasks{state=\"todo\"}"), 5.0);
    assert_eq!(sample(&response, "raftrain_raft_info{node_id=\"1\"}"), 1.0);
    assert!(response.contains("raftrain_build_info{version="), "{response}");
    assert!(response.contains("# HELP raftrain_master_tasks Tasks by queue state"), "{response}");
    assert!(
        response.contains("raftrain_rpc_seconds_bucket{method=\"ReportDataset\""),
        "{response}"
    );
    assert!(sample(&response, "raftrain_raft_fsync_seconds_count") >= 1.0, "{response}");
    assert!(sample(&response, "raftrain_raft_proposals_committed_total") >= 1.0, "{response}");
    assert_eq!(sample(&response, "raftrain_master_passes"), 2.0);
    assert_eq!(sample(&response, "raftrain_master_job_finished"), 0.0);

    let close = "HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";
    for (request, status) in [
        (format!("GET /other {close}"), "HTTP/1.1 404 Not Found"),
        (format!("POST /metrics {close}"), "HTTP/1.1 405 Method Not Allowed"),
        (format!("GET /healthz {close}"), "HTTP/1.1 200 OK"),
        (format!("GET /readyz {close}"), "HTTP/1.1 200 OK"),
    ] {
        let addr = metrics_addr.clone();
        let sent = request.clone();
        let response = tokio::task::spawn_blocking(move || http(&addr, &sent)).await.unwrap();
        assert!(response.starts_with(status), "{request:?} answered {response}");
    }
}

/// `raftrain pserver --metrics-listen` and `raftrain trainer --metrics-listen` serve their
/// gauges: a pserver holding its slot before any trainer, and a trainer waiting for pservers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pservers_and_trainers_serve_metrics() {
    let group = MasterGroup::start(1, &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut pservers = crate::pserver_processes::PServerProcesses::new(&group.addrs, dir.path(), 2);
    let pserver_metrics = free_loopback_addr();
    pservers.spawn_with(&["--metrics-listen", &pserver_metrics]);
    let get = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut response = http(&pserver_metrics, get);
    // Served from the start: lease_held reads 0 until the slot is claimed.
    while sample(&response, "raftrain_pserver_lease_held") != 1.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        response = http(&pserver_metrics, get);
    }
    assert_eq!(sample(&response, "raftrain_pserver_ready"), 0.0, "no trainer initialized it yet");
    assert_eq!(sample(&response, "raftrain_pserver_lease_held"), 1.0, "{}", pservers.logs());
    let not_ready =
        http(&pserver_metrics, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(
        not_ready.starts_with("HTTP/1.1 503") && not_ready.contains("not initialized"),
        "{not_ready}"
    );

    // A dataset that exists: the trainer reports it (submitting the job), then waits for the
    // second pserver slot, which nobody claims.
    let dataset = crate::task_consumer::write_dataset(dir.path(), 4);
    let trainer_metrics = free_loopback_addr();
    let mut trainer = std::process::Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["trainer", "--masters", &group.addrs[0], "--dataset", &dataset, "--features", "2"])
        .args(["--model", "logistic", "--metrics-listen", &trainer_metrics])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start a trainer");
    let response = http(&trainer_metrics, get);
    let not_ready =
        http(&trainer_metrics, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    trainer.kill().expect("kill the trainer");
    assert!(
        not_ready.starts_with("HTTP/1.1 503")
            && (not_ready.contains("not training yet")
                || not_ready.contains("pserver slot")
                || not_ready.contains("master leader")),
        "{not_ready}"
    );
    let _ = trainer.wait();
    assert_eq!(sample(&response, "raftrain_trainer_examples_total"), 0.0, "{response}");
}

/// A pserver without a slot yet (its job is not submitted) answers its probes: alive, with
/// metrics, but not ready, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pserver_waiting_for_its_job_answers_its_probes() {
    let group = MasterGroup::start(1, &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut pservers = crate::pserver_processes::PServerProcesses::new(&group.addrs, dir.path(), 1);
    let metrics = free_loopback_addr();
    pservers.spawn_with(&["--job", "later", "--metrics-listen", &metrics]);
    let get = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let response = http(&metrics, get);
    assert_eq!(sample(&response, "raftrain_pserver_lease_held"), 0.0, "{response}");
    let ready = http(&metrics, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(ready.starts_with("HTTP/1.1 503") && ready.contains("no pserver slot yet"), "{ready}");
    let alive = http(&metrics, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(alive.starts_with("HTTP/1.1 200"), "{alive}\n{}", pservers.logs());
}
