//! Every port of real master and pserver processes bounds what a hostile client can hold:
//! slow calls announcing huge messages take bounded memory, are answered, and give their
//! memory back when the client leaves; sockets that never speak are closed, and more of them
//! than the process has file descriptors do not stop real calls (gRPC and metrics ports).

use std::time::Duration;

use proto::pserver as pb;
use proto::pserver::p_server_service_client::PServerServiceClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::master_group::{free_loopback_addr, MasterGroup};
use crate::pserver_processes::PServerProcesses;
use crate::slow_streams::{resident_bytes, SlowStreams};

/// What the hostile client announced to a pserver (79 MiB, within its 80 MiB limit).
const PSERVER_ANNOUNCED_BYTES: u32 = 82_837_525;
/// What it announced to a master (63 MiB, within the 64 MiB Raft limit).
const MASTER_ANNOUNCED_BYTES: u32 = 63 << 20;
/// Unanswered slow calls cost about 2 MB each without the limits: 600 of them over 1 GiB.
const SLOW_CONNECTION_COUNT: usize = 6;
const SLOW_STREAMS_PER_CONNECTION: usize = 100;
/// How much resident memory the slow calls may add (the budget admits three 79 MiB
/// announcements; the decoder touches a little of each).
const RESIDENT_GROWTH_BYTES_MAX: u64 = 256 << 20;
/// How close to where it started resident memory must come back once the client left.
const RESIDENT_LEFTOVER_BYTES_MAX: u64 = 64 << 20;
/// The body deadline the tests give the processes (by environment, so that a build without
/// the flag still starts and fails the test instead).
const REQUEST_BODY_MS: &str = "3000";
const FIRST_BYTES_MS: &str = "2000";
const IDLE_MS: &str = "2000";
/// Sockets that send the start of a request and then nothing.
const HALF_SPOKEN_SOCKET_COUNT: usize = 20;
/// Idle sockets opened against a process allowed `FD_LIMIT` descriptors.
const IDLE_SOCKET_COUNT: usize = 300;
const FD_LIMIT: u64 = 256;
/// The longest any bounded wait of these tests lasts.
const WAIT_MS_MAX: u64 = 60_000;

fn bound() -> Duration {
    Duration::from_millis(WAIT_MS_MAX)
}

/// Waits until the master group lists a pserver holding the only slot.
async fn wait_served(group: &MasterGroup, processes: &PServerProcesses) {
    let until = Instant::now() + bound();
    while Instant::now() < until {
        if let Ok(table) = group.client().list_pservers().await {
            if !table.pservers.is_empty() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the slot was never held\n{}", processes.logs());
}

/// One pserver `Status` call on a fresh connection, retried until it succeeds or the bound.
async fn pserver_answers(addr: &str) -> Result<(), String> {
    let until = Instant::now() + bound();
    let mut last = String::new();
    while Instant::now() < until {
        let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("address")
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5));
        match endpoint.connect().await {
            Ok(channel) => {
                match PServerServiceClient::new(channel).status(pb::StatusRequest {}).await {
                    Ok(_) => return Ok(()),
                    Err(status) => last = format!("{status:?}"),
                }
            }
            Err(error) => last = format!("{error:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last)
}

/// Waits until resident memory of `pid` is at most `limit`; the last reading.
async fn resident_falls_to(pid: u32, limit: u64) -> u64 {
    let until = Instant::now() + bound();
    loop {
        let resident = resident_bytes(pid);
        if resident <= limit || Instant::now() >= until {
            return resident;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// 600 calls announcing 79 MiB each and sending 20 bytes add little resident memory to a
/// pserver, are all answered (refused, or failed at the body deadline), real calls succeed
/// meanwhile, and the memory is back once the client leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_streams_on_a_pserver_hold_bounded_memory() {
    let group = MasterGroup::start(1, &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut processes = PServerProcesses::new(&group.addrs, dir.path(), 1);
    let index =
        processes.spawn_limited(&[], &[("RAFTRAIN_REQUEST_BODY_MS", REQUEST_BODY_MS)], None);
    wait_served(&group, &processes).await;
    let addr = processes.addrs[index].clone();
    pserver_answers(&addr).await.expect("the pserver answers");
    let pid = processes.pid(index).expect("the pserver runs");
    let before = resident_bytes(pid);

    tracing::info!("--- 600 slow pushes announcing 79 MiB each");
    let path = "/raftrain.pserver.v1.PServerService/PushGrads";
    let mut streams = SlowStreams::open(
        &addr,
        path,
        SLOW_CONNECTION_COUNT,
        SLOW_STREAMS_PER_CONNECTION,
        PSERVER_ANNOUNCED_BYTES,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = resident_bytes(pid);
    eprintln!("pserver resident memory: {before} bytes before, {during} with 600 slow calls open");
    assert!(
        during < before + RESIDENT_GROWTH_BYTES_MAX,
        "resident memory grew from {before} to {during} bytes\n{}",
        processes.logs()
    );
    pserver_answers(&addr).await.expect("real calls succeed beside the slow ones");

    tracing::info!("--- every slow call is answered; memory comes back when the client leaves");
    let answers = streams.answers(bound()).await;
    assert!(!answers.contains_key("unanswered"), "{answers:?}\n{}", processes.logs());
    drop(streams);
    let after = resident_falls_to(pid, before + RESIDENT_LEFTOVER_BYTES_MAX).await;
    assert!(
        after <= before + RESIDENT_LEFTOVER_BYTES_MAX,
        "resident memory stayed at {after} bytes (from {before})\n{}",
        processes.logs()
    );
}

/// Slow calls announcing 63 MiB to a master's client service (which never needs more than a
/// few MiB) and to its Raft service are answered, take little memory, and real calls succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_streams_on_a_master_hold_bounded_memory() {
    let group =
        MasterGroup::start_with_env(1, &[], &[(0, "RAFTRAIN_REQUEST_BODY_MS", REQUEST_BODY_MS)]);
    group.status().await;
    let pid = group.pid(0).expect("the master runs");
    let before = resident_bytes(pid);
    let addr = group.addrs[0].clone();

    tracing::info!("--- 300 slow ReportDataset and 300 slow AppendEntries calls of 63 MiB");
    let half = SLOW_CONNECTION_COUNT / 2;
    let (per_connection, announced) = (SLOW_STREAMS_PER_CONNECTION, MASTER_ANNOUNCED_BYTES);
    let report = "/raftrain.master.v1.MasterService/ReportDataset";
    let mut reports = SlowStreams::open(&addr, report, half, per_connection, announced).await;
    let append = "/raftrain.raft.v1.RaftService/AppendEntries";
    let mut appends = SlowStreams::open(&addr, append, half, per_connection, announced).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = resident_bytes(pid);
    assert!(
        during < before + RESIDENT_GROWTH_BYTES_MAX,
        "resident memory grew from {before} to {during} bytes\n{}",
        group.logs()
    );
    group.status().await;

    for streams in [&mut reports, &mut appends] {
        let answers = streams.answers(bound()).await;
        assert!(!answers.contains_key("unanswered"), "{answers:?}\n{}", group.logs());
    }
    drop((reports, appends));
    let after = resident_falls_to(pid, before + RESIDENT_LEFTOVER_BYTES_MAX).await;
    assert!(after <= before + RESIDENT_LEFTOVER_BYTES_MAX, "resident memory stayed at {after}");
}

/// Opens `count` sockets to `addr` that never send anything.
async fn idle_sockets(addr: &str, count: usize) -> Vec<TcpStream> {
    let mut sockets = Vec::with_capacity(count);
    for _ in 0..count {
        sockets.push(TcpStream::connect(addr).await.expect("the kernel accepts the connection"));
    }
    sockets
}

/// Opens `count` sockets to `addr` that send `start` and then nothing.
async fn half_spoken_sockets(addr: &str, count: usize, start: &[u8]) -> Vec<TcpStream> {
    let mut sockets = idle_sockets(addr, count).await;
    for socket in &mut sockets {
        socket.write_all(start).await.expect("send the start of a request");
    }
    sockets
}

/// How many of `sockets` the server has not closed within the bound (what it sends first, an
/// HTTP/2 server's settings, is read and ignored).
async fn still_open(sockets: Vec<TcpStream>) -> usize {
    let until = Instant::now() + bound();
    let mut open = 0;
    for mut socket in sockets {
        let mut sink = Vec::new();
        if tokio::time::timeout_at(until, socket.read_to_end(&mut sink)).await.is_err() {
            open += 1;
        }
    }
    open
}

/// `GET /healthz` on a fresh connection, retried until it answers 200 or the bound.
async fn healthz(addr: &str) -> Result<(), String> {
    let until = Instant::now() + bound();
    let mut last = String::new();
    while Instant::now() < until {
        let attempt = tokio::time::timeout(Duration::from_secs(5), async {
            let mut socket = TcpStream::connect(addr).await?;
            let request =
                format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
            socket.write_all(request.as_bytes()).await?;
            let mut reply = String::new();
            socket.read_to_string(&mut reply).await?;
            Ok::<_, std::io::Error>(reply)
        });
        match attempt.await {
            Ok(Ok(reply)) if reply.starts_with("HTTP/1.1 200") => return Ok(()),
            Ok(Ok(reply)) => last = reply,
            Ok(Err(error)) => last = error.to_string(),
            Err(_elapsed) => last = "no answer within 5 s".to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(last)
}

/// 300 silent sockets against a pserver allowed 256 file descriptors, on its gRPC port and
/// then on its metrics port: real calls still succeed, and every silent socket is closed, as
/// is every socket that sent the start of a request and then went silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_sockets_beyond_the_fd_limit_do_not_stop_a_pserver() {
    let group = MasterGroup::start(1, &[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut processes = PServerProcesses::new(&group.addrs, dir.path(), 1);
    let metrics = free_loopback_addr();
    let envs = [("RAFTRAIN_FIRST_BYTES_MS", FIRST_BYTES_MS), ("RAFTRAIN_IDLE_MS", IDLE_MS)];
    let extra = ["--metrics-listen", metrics.as_str()];
    let index = processes.spawn_limited(&extra, &envs, Some(FD_LIMIT));
    wait_served(&group, &processes).await;
    let addr = processes.addrs[index].clone();
    pserver_answers(&addr).await.expect("the pserver answers");

    tracing::info!("--- 300 silent sockets on the gRPC port");
    let sockets = idle_sockets(&addr, IDLE_SOCKET_COUNT).await;
    let answered = pserver_answers(&addr).await;
    assert!(answered.is_ok(), "real calls fail: {answered:?}\n{}", processes.logs());
    let open = still_open(sockets).await;
    assert_eq!(open, 0, "silent gRPC sockets left open\n{}", processes.logs());
    let refusal = "the port already holds --connections-max connections";
    assert!(processes.log(index).contains(refusal), "no refusal logged\n{}", processes.logs());

    tracing::info!("--- 300 silent sockets on the metrics port");
    let sockets = idle_sockets(&metrics, IDLE_SOCKET_COUNT).await;
    let answered = healthz(&metrics).await;
    assert!(answered.is_ok(), "/healthz fails: {answered:?}\n{}", processes.logs());
    let open = still_open(sockets).await;
    assert_eq!(open, 0, "silent metrics sockets left open\n{}", processes.logs());

    tracing::info!("--- sockets that send the start of a request, then nothing");
    let preface = b"PRI * HTTP/2.0\r\n";
    let grpc = half_spoken_sockets(&addr, HALF_SPOKEN_SOCKET_COUNT, preface).await;
    let metrics = half_spoken_sockets(&metrics, HALF_SPOKEN_SOCKET_COUNT, b"GET /heal").await;
    let open = still_open(grpc).await + still_open(metrics).await;
    assert_eq!(open, 0, "half-spoken sockets left open\n{}", processes.logs());
    pserver_answers(&addr).await.expect("the pserver still answers");
}
