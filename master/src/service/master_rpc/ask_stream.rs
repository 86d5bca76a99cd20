//! `GetTaskStream`: one trainer client's asks on one long-lived stream, each answered as its own
//! `GetTask` would be (`task_calls::ask_alone`), in order, one at a time: the stream saves a
//! unary call's HTTP/2 stream, headers and trailers on every hand-off. A refusal (not the
//! leader, a bad field, the job gone) is the ask's answer, and then the stream ends, so a
//! master that stopped leading holds no client's stream; so does the master's stop
//! (`RpcHandler::end_streams`), or its graceful stop would wait for the clients to close them.
//! A stream lives at most the server's request-body deadline (`--request-body-ms`); clients
//! replace theirs sooner.

use super::batched_asks::answer_of;
use super::task_calls::ask_alone;
use super::MasterRpc;
use platform::serve_in_order;
use proto::master as pb;
use proto::master::get_task_answer::Answer;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Status, Streaming};

pub(crate) type AskStream = ReceiverStream<Result<pb::GetTaskAnswer, Status>>;

/// Answers the asks of one stream in order until the client closes it, an ask is refused, or
/// the master stops; a message that does not decode ends it with its status.
pub(super) fn serve(rpc: MasterRpc, requests: Streaming<pb::GetTaskRequest>) -> AskStream {
    let end = rpc.node.rpc_handler().streams_end();
    serve_in_order(requests, end, move |request| {
        let rpc = rpc.clone();
        async move {
            let answer = answer_of(ask_alone(&rpc, request).await);
            let refused = matches!(answer, Answer::Refused(_));
            (Ok(pb::GetTaskAnswer { answer: Some(answer) }), refused)
        }
    })
}
