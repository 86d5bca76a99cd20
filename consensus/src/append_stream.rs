//! AppendEntries over one gRPC stream per leader-to-follower link (`AppendEntriesStream`). Each
//! request message is one AppendEntries, answered on the stream in order before the next is
//! read, so a stream carries one append at a time, as openraft's replication sends them. What it
//! saves is the HTTP/2 stream, headers and trailers of a unary call on every entry: `raftrain
//! bench consensus` measured a write inside the leader 0.71-0.74 ms at p50 with a unary call
//! per entry and 0.49-0.50 ms with the stream.
//!
//! A stream lives at most [`STREAM_AGE_MAX`]: the server fails a call whose request body has
//! not ended within its body deadline (`--request-body-ms`, 30 s by default), so the leader
//! opens a new stream well before that.

use std::time::Duration;

use platform::security::RpcChannel;
use platform::{serve_in_order, CallStream, StreamFailure};
use proto::raft::raft_service_client::RaftServiceClient;
use proto::raft::{RaftReply, RaftRequest};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::rpc_handler::RpcHandler;
use crate::service::{decode_payload, encode_reply};

/// A stream is replaced once it is this old: a third of the default body deadline.
pub(crate) const STREAM_AGE_MAX: Duration = Duration::from_secs(10);

/// The leader's end of one stream to a follower.
pub(crate) type AppendStream = CallStream<RaftRequest, RaftReply>;

/// Answers the appends of one stream in order, until the leader closes it or the node's
/// servers stop ([`RpcHandler::end_streams`]). A message that does not decode ends the
/// stream with `INVALID_ARGUMENT`, as it fails a unary call.
pub(crate) fn serve(
    handler: RpcHandler,
    requests: tonic::Streaming<RaftRequest>,
) -> ReceiverStream<Result<RaftReply, Status>> {
    let end = handler.streams_end();
    serve_in_order(requests, end, move |request: RaftRequest| {
        let handler = handler.clone();
        async move { (append(&handler, &request).await, false) }
    })
}

async fn append(handler: &RpcHandler, request: &RaftRequest) -> Result<RaftReply, Status> {
    let result = handler.append_entries(decode_payload(&request.payload)?).await;
    encode_reply(&result)
}

/// Opens a stream to the follower of `client`, giving up at `deadline`.
pub(crate) async fn open(
    client: &mut RaftServiceClient<RpcChannel>,
    deadline: Instant,
) -> Result<AppendStream, StreamFailure> {
    CallStream::open(|requests| client.append_entries_stream(requests), deadline).await
}

/// Whether `stream` is young enough for another append.
pub(crate) fn fresh(stream: &AppendStream) -> bool {
    stream.age() < STREAM_AGE_MAX
}
