//! `PutStream`: the benchmark's writes over one gRPC stream per client. Each request is written
//! through the node and answered on the stream, in order, before the next is read, so a stream
//! is one client with one write outstanding, as with unary `Put`; what it saves is the HTTP/2
//! stream, headers and trailers that every unary call sets up (TiKV's clients batch their
//! requests over streams for the same reason).

use std::time::Duration;

use proto::kv::kv_service_client::KvServiceClient;
use proto::kv::{PutReply, PutRequest};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::{Status, Streaming};

use super::service::write_status;
use consensus::kv::{KvCommand, KvStore};
use consensus::ConsensusNode;

/// Answers the requests of one stream in order; the first failed write ends the stream with
/// its status, as does a request that does not decode.
pub(crate) fn serve(
    node: ConsensusNode<KvStore>,
    mut requests: Streaming<PutRequest>,
) -> ReceiverStream<Result<PutReply, Status>> {
    let (replies, receiver) = mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            let reply = match requests.message().await {
                Ok(Some(PutRequest { key, value })) => {
                    let command = KvCommand::Put { key, value }.encode();
                    node.write(command).await.map(|_| PutReply {}).map_err(write_status)
                }
                Ok(None) => return,
                Err(status) => Err(status),
            };
            let failed = reply.is_err();
            // The client may have gone; then nobody is waiting for the rest.
            if replies.send(reply).await.is_err() || failed {
                return;
            }
        }
    });
    ReceiverStream::new(receiver)
}

/// One client's write stream: `put` sends a write and waits for its answer.
pub struct PutStream {
    requests: mpsc::Sender<PutRequest>,
    replies: Streaming<PutReply>,
    timeout: Duration,
}

impl PutStream {
    /// Opens a stream on `client`; each write fails after `timeout`.
    pub(crate) async fn open(
        client: &mut KvServiceClient<Channel>,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let (requests, receiver) = mpsc::channel(1);
        let replies = client.put_stream(ReceiverStream::new(receiver)).await?.into_inner();
        Ok(Self { requests, replies, timeout })
    }

    /// Writes `key = value`; returns once it is committed. After an error the stream is closed:
    /// open another.
    pub async fn put(&mut self, key: String, value: String) -> anyhow::Result<()> {
        let closed = || anyhow::anyhow!("the write stream has closed");
        self.requests.send(PutRequest { key, value }).await.map_err(|_| closed())?;
        let answer = tokio::time::timeout(self.timeout, self.replies.message())
            .await
            .map_err(|_| anyhow::anyhow!("no answer on the write stream in {:?}", self.timeout))?;
        match answer? {
            Some(PutReply {}) => Ok(()),
            None => Err(closed()),
        }
    }
}
