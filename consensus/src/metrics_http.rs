//! `--metrics-listen`: a minimal HTTP/1.1 endpoint serving Prometheus text metrics on
//! `GET /metrics`. Each connection gets one answer and is closed; a request that is too large,
//! too slow or not `GET /metrics` gets a 4xx status, never a hang or a panic.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A request head may be at most this large.
const REQUEST_BYTES_MAX: usize = 8 * 1024;
/// A client must send its request head within this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The Prometheus text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Renders the metrics text at each scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Serves `render` on `listener` until `shutdown` completes.
pub async fn serve(listener: TcpListener, render: Render, shutdown: impl Future<Output = ()>) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(answer(stream, render.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "metrics: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

async fn answer(mut stream: TcpStream, render: Render) {
    let head = tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut stream)).await;
    let (status, body) = match head {
        Err(_) => ("408 Request Timeout", "request head not received in time\n".to_string()),
        Ok(Err(reason)) => ("400 Bad Request", format!("{reason}\n")),
        Ok(Ok(head)) => route(&head, &render),
    };
    let content_type = if status.starts_with("200") { CONTENT_TYPE } else { "text/plain" };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    // The scraper may have gone; nothing to do about it.
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The status line and body for a request head.
fn route(head: &str, render: &Render) -> (&'static str, String) {
    let mut words = head.lines().next().unwrap_or_default().split_whitespace();
    let (method, path) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
    let path = path.split('?').next().unwrap_or_default();
    match (method, path) {
        ("GET", "/metrics") => ("200 OK", render()),
        ("GET", _) => ("404 Not Found", "metrics are served at /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "only GET is served\n".to_string()),
    }
}

/// Reads up to the blank line that ends the request head.
async fn read_head(stream: &mut TcpStream) -> Result<String, String> {
    let mut head = Vec::with_capacity(512);
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
        if head.len() > REQUEST_BYTES_MAX {
            return Err(format!("request head over {REQUEST_BYTES_MAX} bytes"));
        }
        let read = stream.read(&mut buffer).await.map_err(|error| error.to_string())?;
        if read == 0 {
            return Err("connection closed before the request head ended".to_string());
        }
        head.extend_from_slice(&buffer[..read]);
    }
    String::from_utf8(head).map_err(|_| "request head is not UTF-8".to_string())
}

/// Appends one metric with its help and type lines.
pub fn push_metric(text: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
}

/// The Raft metrics of one node, as gauges named `raftrain_raft_*`.
pub fn raft_metrics_text(metrics: &crate::Metrics) -> String {
    let mut text = String::new();
    let gauge = |text: &mut String, name: &str, help: &str, value: f64| {
        push_metric(text, &format!("raftrain_raft_{name}"), "gauge", help, value);
    };
    let leader = metrics.current_leader.map_or(0.0, |id| id as f64);
    let is_leader = metrics.state == openraft::ServerState::Leader;
    let last_log = metrics.last_log_index.map_or(0.0, |index| index as f64);
    let applied = metrics.last_applied.map_or(0.0, |log_id| log_id.index as f64);
    let snapshot = metrics.snapshot.map_or(0.0, |log_id| log_id.index as f64);
    gauge(&mut text, "node_id", "This node's id.", metrics.id as f64);
    gauge(&mut text, "term", "The current Raft term.", metrics.current_term as f64);
    gauge(&mut text, "leader_id", "The leader this node knows (0: none).", leader);
    gauge(&mut text, "is_leader", "1 if this node leads.", f64::from(u8::from(is_leader)));
    gauge(&mut text, "last_log_index", "Index of the last log entry.", last_log);
    gauge(&mut text, "last_applied_index", "Index of the last applied entry.", applied);
    gauge(&mut text, "snapshot_index", "Last index in the newest snapshot.", snapshot);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render() -> Render {
        Arc::new(|| "up 1\n".to_string())
    }

    /// Only `GET /metrics` (with or without a query) is served; anything else names the rule.
    #[test]
    fn routes_by_method_and_path() {
        let cases = [
            ("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "200 OK", "up 1\n"),
            ("GET /metrics?name=x HTTP/1.0\r\n\r\n", "200 OK", "up 1\n"),
            ("GET / HTTP/1.1\r\n\r\n", "404 Not Found", "metrics are served at /metrics\n"),
            ("PUT /metrics HTTP/1.1\r\n\r\n", "405 Method Not Allowed", "only GET is served\n"),
            ("\r\n\r\n", "405 Method Not Allowed", "only GET is served\n"),
        ];
        for (head, status, body) in cases {
            assert_eq!(route(head, &render()), (status, body.to_string()), "{head:?}");
        }
    }

    /// A metric is its help line, its type line and one sample.
    #[test]
    fn metric_lines_follow_the_text_format() {
        let mut text = String::new();
        push_metric(&mut text, "raftrain_x", "gauge", "An x.", 2.5);
        assert_eq!(text, "# HELP raftrain_x An x.\n# TYPE raftrain_x gauge\nraftrain_x 2.5\n");
    }

    /// A request head that never ends is refused once it passes the size limit.
    #[tokio::test]
    async fn oversized_head_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let client = tokio::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.expect("connect");
            // One byte over the limit, so the server has read all of it when it answers (unread
            // bytes would make its close a reset that can discard the answer).
            let filler = vec![b'a'; REQUEST_BYTES_MAX + 1];
            stream.write_all(&filler).await.expect("send the head");
            let mut response = String::new();
            let _ = stream.read_to_string(&mut response).await;
            response
        });
        let (stream, _) = listener.accept().await.expect("accept");
        answer(stream, render()).await;
        let response = client.await.expect("the client finishes");
        assert!(response.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{response}");
    }
}
