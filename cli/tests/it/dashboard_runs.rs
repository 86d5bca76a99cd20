//! The dashboard's view lists the group's torchrun rendezvous runs (id, keys, bytes, last
//! write), as the leader holds them, on a real master.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use client::RendezvousWrite;

use crate::master_group::MasterGroup;

/// The body of a plain HTTP GET of `path` on `addr`.
fn get(addr: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the dashboard");
    stream.set_read_timeout(Some(Duration::from_secs(10))).expect("a read timeout");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).expect("send the request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read the response");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_lists_the_rendezvous_runs() {
    let group = MasterGroup::start(1, &["--metrics-listen", "127.0.0.1:0"]);
    let client = group.client();
    let write = RendezvousWrite::Set(b"value".to_vec());
    client.rendezvous_write("run42", "key", write).await.expect("a rendezvous write");
    let addr = group.metrics_addr(0).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let body = tokio::task::block_in_place(|| get(&addr, "/api/v1/view"));
        let view: serde_json::Value = serde_json::from_str(&body).expect("the view is JSON");
        let runs = &view["rendezvous"]["runs"];
        if runs.as_array().is_some_and(|runs| !runs.is_empty()) {
            assert_eq!(runs[0]["run"], "run42", "{view}");
            assert_eq!(runs[0]["keys"], 1, "{view}");
            assert!(runs[0]["bytes"].as_u64() > Some(0), "{view}");
            assert!(view["rendezvous"]["error"].is_null(), "{view}");
            return;
        }
        assert!(Instant::now() < deadline, "no run in the view: {view}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
