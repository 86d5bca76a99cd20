//! `serve_in_order`: the server's end of a stream of calls answered one at a time, in order
//! (the client's end is [`crate::CallStream`]). The stream ends when the client closes it, when
//! an answer is an error or says it is the last, and when `end` turns true: a server's graceful
//! stop waits for its open calls, so whatever stops it ends its streams first.

use std::future::Future;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

/// One request's answer, and whether the stream ends after it.
pub type Answered<Reply> = (Result<Reply, Status>, bool);

/// Answers the requests of `requests` with `answer`, in order, one at a time. A message that
/// does not decode ends the stream with its status.
pub fn serve_in_order<Request, Reply, Answer, Answering>(
    mut requests: Streaming<Request>,
    mut end: watch::Receiver<bool>,
    mut answer: Answer,
) -> ReceiverStream<Result<Reply, Status>>
where
    Request: Send + 'static,
    Reply: Send + 'static,
    Answer: FnMut(Request) -> Answering + Send + 'static,
    Answering: Future<Output = Answered<Reply>> + Send,
{
    let (replies, receiver) = mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            let message = tokio::select! {
                message = requests.message() => message,
                _ = end.wait_for(|end| *end) => return,
            };
            let (reply, last) = match message {
                Ok(Some(request)) => answer(request).await,
                Ok(None) => return,
                Err(status) => (Err(status), true),
            };
            let last = last || reply.is_err();
            // The client may have gone; then nobody waits for the rest.
            if replies.send(reply).await.is_err() || last {
                return;
            }
        }
    });
    ReceiverStream::new(receiver)
}
