//! `AppendStream`: AppendEntries over one gRPC stream per leader-to-follower link. Each request
//! message is one AppendEntries, answered on the stream in order before the next is read, so a
//! stream carries one append at a time, as openraft's replication sends them. What it saves is
//! the HTTP/2 stream, headers and trailers of a unary call on every entry: `raftrain bench
//! consensus` measured a client's unary write 0.12-0.17 ms slower than the same write sent on a
//! stream, and every write pays one AppendEntries round trip.
//!
//! A stream lives at most [`STREAM_AGE_MAX`]: the server fails a call whose request body has
//! not ended within its body deadline (`--request-body-ms`, 30 s by default), so the leader
//! opens a new stream well before that.

use std::time::Duration;

use proto::raft::raft_service_client::RaftServiceClient;
use proto::raft::{RaftReply, RaftRequest};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

use crate::rpc_handler::RpcHandler;
use crate::service::{decode_payload, encode_reply};
use platform::security::RpcChannel;

/// A stream is replaced once it is this old: a third of the default body deadline.
pub(crate) const STREAM_AGE_MAX: Duration = Duration::from_secs(10);

/// Answers the appends of one stream in order, until the leader closes it or the node's
/// servers stop ([`RpcHandler::end_streams`]). A message that does not decode ends the
/// stream with `INVALID_ARGUMENT`, as it fails a unary call.
pub(crate) fn serve(
    handler: RpcHandler,
    mut requests: Streaming<RaftRequest>,
) -> ReceiverStream<Result<RaftReply, Status>> {
    let (replies, receiver) = mpsc::channel(1);
    let mut end = handler.streams_end();
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                message = requests.message() => message,
                _ = end.wait_for(|end| *end) => return,
            };
            let reply = match message {
                Ok(Some(request)) => append(&handler, &request).await,
                Ok(None) => return,
                Err(status) => Err(status),
            };
            let failed = reply.is_err();
            // The leader may have gone; then nobody waits for the rest.
            if replies.send(reply).await.is_err() || failed {
                return;
            }
        }
    });
    ReceiverStream::new(receiver)
}

async fn append(handler: &RpcHandler, request: &RaftRequest) -> Result<RaftReply, Status> {
    let result = handler.append_entries(decode_payload(&request.payload)?).await;
    encode_reply(&result)
}

/// Why a streamed append got no answer.
#[derive(Debug)]
pub(crate) enum StreamFailure {
    /// The server refused the stream or failed it with this status.
    Status(Status),
    /// The stream ended before the answer (the server closed it, or the connection broke).
    Ended,
    /// No answer by the deadline.
    TimedOut,
}

/// The leader's end of one stream to a follower.
pub(crate) struct AppendStream {
    requests: mpsc::Sender<RaftRequest>,
    replies: Streaming<RaftReply>,
    opened: Instant,
}

impl AppendStream {
    /// Opens a stream on `client`, giving up at `deadline`.
    pub(crate) async fn open(
        client: &mut RaftServiceClient<RpcChannel>,
        deadline: Instant,
    ) -> Result<Self, StreamFailure> {
        let (requests, receiver) = mpsc::channel(1);
        let opening = client.append_entries_stream(ReceiverStream::new(receiver));
        let replies = match tokio::time::timeout_at(deadline, opening).await {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => return Err(StreamFailure::Status(status)),
            Err(_elapsed) => return Err(StreamFailure::TimedOut),
        };
        Ok(Self { requests, replies, opened: Instant::now() })
    }

    /// Whether the stream is young enough for another append.
    pub(crate) fn fresh(&self) -> bool {
        self.opened.elapsed() < STREAM_AGE_MAX
    }

    /// Sends one append and waits for its answer until `deadline`. After a failure the stream
    /// is of no further use: an answer may still be on its way.
    pub(crate) async fn append(
        &mut self,
        request: RaftRequest,
        deadline: Instant,
    ) -> Result<RaftReply, StreamFailure> {
        let exchange = async {
            self.requests.send(request).await.map_err(|_| StreamFailure::Ended)?;
            match self.replies.message().await {
                Ok(Some(reply)) => Ok(reply),
                Ok(None) => Err(StreamFailure::Ended),
                Err(status) => Err(StreamFailure::Status(status)),
            }
        };
        tokio::time::timeout_at(deadline, exchange).await.unwrap_or(Err(StreamFailure::TimedOut))
    }
}
