//! Slowloris on a real master's metrics port (issue 35, item 13): connections that dribble
//! their headers a byte at a time do not keep `/healthz` from answering (a full port closes
//! its oldest connection still sending headers to let the probe in), and a connection that
//! never finishes its headers is closed once `--http-header-read-ms` has passed.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::master_group::MasterGroup;

/// The connection cap the flooded master runs with.
const CONNECTIONS_MAX: &str = "32";
/// Dribbling connections opened against it: half again the cap.
const DRIBBLER_COUNT: usize = 48;
/// How often a dribbler sends its next byte.
const DRIBBLE_MS: u64 = 200;
/// The header-read bound of the master whose connection must be closed by it; the flooded
/// master's is far longer than the test, so that only making room can let a probe in.
const HEADER_READ_MS_SHORT: &str = "1000";
const HEADER_READ_MS_LONG: &str = "600000";
/// The longest any bounded wait of these tests lasts: a bound, not a measurement.
const WAIT: Duration = Duration::from_secs(60);

/// The start of a request whose headers never end.
const ENDLESS_HEADERS: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Dribble: ";

/// A master with `--metrics-listen` and the port limits `envs`; its metrics address.
async fn master_with_metrics(envs: &[(&str, &str)]) -> (MasterGroup, String) {
    let envs: Vec<(usize, &str, &str)> =
        envs.iter().map(|(name, value)| (0, *name, *value)).collect();
    let group = MasterGroup::start_with_env(1, &["--metrics-listen", "127.0.0.1:0"], &envs);
    group.status().await;
    let metrics = group.metrics_addr(0).await;
    (group, metrics)
}

/// Opens `count` connections that send the start of a request, then one more byte of an
/// endless header every `DRIBBLE_MS`, until dropped.
async fn dribblers(addr: &str, count: usize) -> tokio::task::JoinSet<()> {
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..count {
        let mut socket = TcpStream::connect(addr).await.expect("the kernel accepts it");
        socket.write_all(ENDLESS_HEADERS).await.expect("send the start of a request");
        set.spawn(async move {
            while socket.write_all(b"a").await.is_ok() {
                tokio::time::sleep(Duration::from_millis(DRIBBLE_MS)).await;
            }
        });
    }
    set
}

/// One `GET path` on a fresh connection, a single attempt: the whole response, or what failed.
async fn get_once(addr: &str, path: &str) -> String {
    let attempt = async {
        let mut socket = TcpStream::connect(addr).await?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        socket.write_all(request.as_bytes()).await?;
        let mut reply = String::new();
        socket.read_to_string(&mut reply).await?;
        Ok::<_, std::io::Error>(reply)
    };
    match tokio::time::timeout(WAIT, attempt).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(error)) => format!("failed: {error}"),
        Err(_elapsed) => "no answer".to_string(),
    }
}

/// With the metrics port held full by connections dribbling their headers (more of them than
/// its connection cap), a new probe is still answered at its first attempt, as are a scrape
/// and the next probe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_are_answered_on_a_metrics_port_full_of_dribblers() {
    let envs = [
        ("RAFTRAIN_CONNECTIONS_MAX", CONNECTIONS_MAX),
        ("RAFTRAIN_HTTP_HEADER_READ_MS", HEADER_READ_MS_LONG),
    ];
    let (group, metrics) = master_with_metrics(&envs).await;

    tracing::info!("--- {DRIBBLER_COUNT} connections dribble their headers");
    let flood = dribblers(&metrics, DRIBBLER_COUNT).await;
    for path in ["/healthz", "/metrics", "/healthz"] {
        let reply = get_once(&metrics, path).await;
        assert!(
            reply.starts_with("HTTP/1.1 200"),
            "{path} under the flood: {reply:?}\n{}",
            group.logs()
        );
    }
    assert!(!flood.is_empty(), "the dribblers ran throughout");
}

/// A connection that keeps sending header bytes but never ends its headers is closed by the
/// server once the header-read bound has passed (well before the idle bound: it is never
/// idle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_ends_its_headers_is_closed() {
    let (group, metrics) =
        master_with_metrics(&[("RAFTRAIN_HTTP_HEADER_READ_MS", HEADER_READ_MS_SHORT)]).await;
    let mut socket = TcpStream::connect(&metrics).await.expect("connect to the metrics port");
    socket.write_all(ENDLESS_HEADERS).await.expect("send the start of a request");
    let closed = async {
        let mut buffer = [0u8; 1024];
        loop {
            tokio::select! {
                read = socket.read(&mut buffer) => match read {
                    // A 408 or nothing, then the end: closed either way.
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                },
                () = tokio::time::sleep(Duration::from_millis(DRIBBLE_MS)) => {
                    if socket.write_all(b"a").await.is_err() {
                        return;
                    }
                }
            }
        }
    };
    let outcome = tokio::time::timeout(WAIT, closed).await;
    assert!(outcome.is_ok(), "the dribbling connection was never closed\n{}", group.logs());
    let reply = get_once(&metrics, "/healthz").await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply:?}");
}
