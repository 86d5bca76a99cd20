//! `CallStream`: the client's end of a long-lived gRPC stream that carries one call at a time,
//! each request answered in order before the next is sent (a Raft leader's appends, a client's
//! asks, the key-value bench's writes). What it saves over a unary call each is the HTTP/2
//! stream, headers and trailers of every call; the server's end is [`crate::serve_in_order`].

use std::future::Future;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

/// Why a call on a stream got no answer.
#[derive(Debug)]
pub enum StreamFailure {
    /// The server refused the stream, or failed it, with this status.
    Status(Status),
    /// The stream ended before the answer (the server closed it, or the connection broke).
    Ended,
    /// No answer by the deadline.
    TimedOut,
}

/// One open stream of calls.
#[derive(Debug)]
pub struct CallStream<Request, Reply> {
    requests: mpsc::Sender<Request>,
    replies: Streaming<Reply>,
    opened: Instant,
}

impl<Request, Reply> CallStream<Request, Reply> {
    /// Opens a stream with `opening` (the generated client's streaming method, given the
    /// requests to come), giving up at `deadline`.
    pub async fn open<Opening>(
        opening: impl FnOnce(ReceiverStream<Request>) -> Opening,
        deadline: Instant,
    ) -> Result<Self, StreamFailure>
    where
        Opening: Future<Output = Result<tonic::Response<Streaming<Reply>>, Status>>,
    {
        let (requests, receiver) = mpsc::channel(1);
        let replies = match tokio::time::timeout_at(deadline, opening(receiver.into())).await {
            Ok(Ok(response)) => response.into_inner(),
            Ok(Err(status)) => return Err(StreamFailure::Status(status)),
            Err(_elapsed) => return Err(StreamFailure::TimedOut),
        };
        Ok(Self { requests, replies, opened: Instant::now() })
    }

    /// How long ago the stream was opened.
    pub fn age(&self) -> Duration {
        self.opened.elapsed()
    }

    /// Sends one request and waits for its answer until `deadline`. After a failure the stream
    /// is of no further use: an answer may still be on its way.
    pub async fn call(
        &mut self,
        request: Request,
        deadline: Instant,
    ) -> Result<Reply, StreamFailure> {
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
