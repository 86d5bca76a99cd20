//! `SlowStreams`: a raw HTTP/2 client doing what a hostile one does to a gRPC port: many
//! calls, each announcing a huge message in its 5-byte prefix and sending a few bytes of it,
//! then nothing. Says how (and whether) the server answered each call.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Bytes of each message actually sent after its prefix.
const SENT_BYTES: usize = 15;

/// Many slow calls over a few connections; dropping it closes the connections.
pub struct SlowStreams {
    responses: Vec<h2::client::ResponseFuture>,
    /// Held so that no call's request ends: the server keeps waiting for the rest.
    _senders: Vec<h2::SendStream<Bytes>>,
    connections: Vec<JoinHandle<()>>,
}

impl SlowStreams {
    /// Opens `connection_count` x `streams_per_connection` calls of `path` on `addr`, each
    /// announcing `announced_bytes`.
    pub async fn open(
        addr: &str,
        path: &str,
        connection_count: usize,
        streams_per_connection: usize,
        announced_bytes: u32,
    ) -> Self {
        let mut streams =
            Self { responses: Vec::new(), _senders: Vec::new(), connections: Vec::new() };
        let mut prefix = vec![0u8];
        prefix.extend(announced_bytes.to_be_bytes());
        prefix.extend([7u8; SENT_BYTES]);
        let data = Bytes::from(prefix);
        for _ in 0..connection_count {
            let tcp = TcpStream::connect(addr).await.expect("connect to the gRPC port");
            let (client, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
            streams.connections.push(tokio::spawn(async move {
                let _ = connection.await;
            }));
            let mut client = client;
            for _ in 0..streams_per_connection {
                client = client.ready().await.expect("the connection takes another stream");
                let request = http::Request::post(format!("http://{addr}{path}"))
                    .header("content-type", "application/grpc")
                    .header("te", "trailers")
                    .body(())
                    .expect("a valid request");
                let (response, mut sender) =
                    client.send_request(request, false).expect("open a stream");
                sender.send_data(data.clone(), false).expect("send the prefix");
                streams.responses.push(response);
                streams._senders.push(sender);
            }
        }
        streams
    }

    /// Waits up to `bound` for every call's answer; how many got each `grpc-status`
    /// ("none" for an answer without one, "unanswered" for none within the bound).
    pub async fn answers(&mut self, bound: Duration) -> BTreeMap<String, usize> {
        let until = Instant::now() + bound;
        let mut counts = BTreeMap::new();
        for response in self.responses.drain(..) {
            let status = match tokio::time::timeout_at(until, response).await {
                Err(_elapsed) => "unanswered".to_string(),
                Ok(Err(error)) => format!("reset ({error})"),
                Ok(Ok(response)) => grpc_status(response, until).await,
            };
            *counts.entry(status).or_insert(0) += 1;
        }
        counts
    }
}

/// The call's `grpc-status`: in the headers of a trailers-only answer, else in the trailers.
async fn grpc_status(response: http::Response<h2::RecvStream>, until: Instant) -> String {
    if let Some(status) = response.headers().get("grpc-status") {
        return status.to_str().unwrap_or("invalid").to_string();
    }
    let mut body = response.into_body();
    while let Ok(Some(Ok(_data))) = tokio::time::timeout_at(until, body.data()).await {}
    match tokio::time::timeout_at(until, body.trailers()).await {
        Ok(Ok(Some(trailers))) => trailers
            .get("grpc-status")
            .and_then(|status| status.to_str().ok())
            .unwrap_or("none")
            .to_string(),
        Ok(_) => "none".to_string(),
        Err(_elapsed) => "unanswered".to_string(),
    }
}

impl Drop for SlowStreams {
    fn drop(&mut self) {
        for connection in &self.connections {
            connection.abort();
        }
    }
}

/// Resident memory of process `pid`, in bytes (`VmRSS` of `/proc/PID/status`).
pub fn resident_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status
        .lines()
        .find(|line| line.starts_with("VmRSS:"))
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<u64>().ok())
        .unwrap_or(0);
    kib * 1024
}
