//! `PutStream`: the benchmark's writes over one gRPC stream per client. Each request is written
//! through the node and answered on the stream, in order, before the next is read, so a stream
//! is one client with one write outstanding, as with unary `Put`; what it saves is the HTTP/2
//! stream, headers and trailers that every unary call sets up (TiKV's clients batch their
//! requests over streams for the same reason).

use std::time::Duration;

use platform::{serve_in_order, CallStream, StreamFailure};
use proto::kv::kv_service_client::KvServiceClient;
use proto::kv::{PutReply, PutRequest};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Status, Streaming};

use super::service::write_status;
use consensus::kv::{KvCommand, KvStore};
use consensus::ConsensusNode;

/// Answers the requests of one stream in order; the first failed write ends the stream with
/// its status, as does a request that does not decode, and so does the node's stop.
pub(crate) fn serve(
    node: ConsensusNode<KvStore>,
    requests: Streaming<PutRequest>,
) -> ReceiverStream<Result<PutReply, Status>> {
    let end = node.rpc_handler().streams_end();
    serve_in_order(requests, end, move |PutRequest { key, value }| {
        let node = node.clone();
        async move {
            let command = KvCommand::Put { key, value }.encode();
            (node.write(command).await.map(|_| PutReply {}).map_err(write_status), false)
        }
    })
}

/// One client's write stream: `put` sends a write and waits for its answer.
pub struct PutStream {
    stream: CallStream<PutRequest, PutReply>,
    timeout: Duration,
}

impl PutStream {
    /// Opens a stream on `client`; each write fails after `timeout`.
    pub(crate) async fn open(
        client: &mut KvServiceClient<Channel>,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let deadline = Instant::now() + timeout;
        let stream = CallStream::open(|puts| client.put_stream(puts), deadline).await;
        Ok(Self { stream: stream.map_err(failure)?, timeout })
    }

    /// Writes `key = value`; returns once it is committed. After an error the stream is closed:
    /// open another.
    pub async fn put(&mut self, key: String, value: String) -> anyhow::Result<()> {
        let deadline = Instant::now() + self.timeout;
        self.stream.call(PutRequest { key, value }, deadline).await.map_err(failure)?;
        Ok(())
    }
}

fn failure(failure: StreamFailure) -> anyhow::Error {
    match failure {
        StreamFailure::Status(status) => status.into(),
        StreamFailure::Ended => anyhow::anyhow!("the write stream has closed"),
        StreamFailure::TimedOut => anyhow::anyhow!("no answer on the write stream in time"),
    }
}
