//! `AskStreams`: a client's asks (`GetTask`) on one long-lived `GetTaskStream` to the master it
//! follows, instead of a unary call each: a message each way per ask saves the call's HTTP/2
//! stream, headers and trailers, the dearest part of a task hand-off after the replicated write
//! itself. A `MasterClient` sends its stamped writes one at a time, so one stream carries them
//! all, in order.
//!
//! A stream is replaced once [`STREAM_AGE_MAX`] old (the master fails a call whose request body
//! has not ended within its body deadline, 30 s by default) and when it ended meanwhile (the
//! master refused an ask, stopped, or the connection broke): the ask then goes on a new one,
//! under the same stamp, so the master applies it once. A master that answers `UNIMPLEMENTED`
//! (an older build) is sent unary `GetTask`s for [`UNSTREAMED_FOR`].

use std::sync::Mutex;
use std::time::Duration;

use platform::{CallStream, StreamFailure as Failure};
use proto::master as pb;
use proto::master::get_task_answer::Answer;
use tokio::time::Instant;
use tonic::Status;

use crate::ask_gather::refusal_status;
use crate::master_client::ServiceClient;

/// A stream is replaced once it is this old: a third of the masters' default body deadline.
const STREAM_AGE_MAX: Duration = Duration::from_secs(10);
/// How long after a master answered `GetTaskStream` with `UNIMPLEMENTED` its asks go unary
/// without trying a stream (a rolling upgrade may replace its build meanwhile).
const UNSTREAMED_FOR: Duration = Duration::from_secs(60);

/// One client's ask stream, and the master that last refused one.
#[derive(Debug, Default)]
pub(crate) struct AskStreams {
    open: Mutex<Option<OpenStream>>,
    refused_by: Mutex<Option<(String, Instant)>>,
}

/// The stream to the master at `addr`.
#[derive(Debug)]
struct OpenStream {
    addr: String,
    stream: CallStream<pb::GetTaskRequest, pb::GetTaskAnswer>,
}

impl AskStreams {
    /// The answer to `request` from the master at `addr` (on `service`), as a `GetTask` of it
    /// would be, within `timeout`; `None` when it must go as a `GetTask` (the master has no
    /// stream).
    pub(crate) async fn ask(
        &self,
        service: &mut ServiceClient,
        addr: &str,
        request: pb::GetTaskRequest,
        timeout: Duration,
    ) -> Option<Result<pb::GetTaskReply, Status>> {
        if self.unstreamed(addr) {
            return None;
        }
        let deadline = Instant::now() + timeout;
        if let Some(mut stream) = self.reusable(addr) {
            match stream.ask(request.clone(), deadline).await {
                Ok(answer) => return Some(self.answered(stream, answer)),
                Err(Failure::TimedOut) => return Some(Err(timed_out(timeout))),
                // Ended meanwhile: the same ask, under the same stamp, on a new stream.
                Err(Failure::Ended | Failure::Status(_)) => {}
            }
        }
        let failure = match OpenStream::open(service, addr, deadline).await {
            Ok(mut stream) => match stream.ask(request, deadline).await {
                Ok(answer) => return Some(self.answered(stream, answer)),
                Err(failure) => failure,
            },
            Err(failure) => failure,
        };
        match failure {
            Failure::Status(status) if status.code() == tonic::Code::Unimplemented => {
                tracing::debug!(addr, "the master has no ask stream; asking with GetTask");
                *self.refused_by.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
                    Some((addr.to_string(), Instant::now()));
                None
            }
            Failure::Status(status) => Some(Err(status)),
            Failure::Ended => Some(Err(Status::unavailable("the ask stream ended unanswered"))),
            Failure::TimedOut => Some(Err(timed_out(timeout))),
        }
    }

    /// Whether the master at `addr` refused a stream a moment ago.
    fn unstreamed(&self, addr: &str) -> bool {
        let refused = self.refused_by.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        refused.as_ref().is_some_and(|(by, at)| by == addr && at.elapsed() < UNSTREAMED_FOR)
    }

    /// The open stream, if it goes to `addr` and is young enough for another ask.
    fn reusable(&self, addr: &str) -> Option<OpenStream> {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        open.take().filter(|open| open.addr == addr && open.stream.age() < STREAM_AGE_MAX)
    }

    /// The ask's answer; the stream is kept for the next unless the master refused the ask
    /// (it then ends the stream).
    fn answered(
        &self,
        stream: OpenStream,
        answer: pb::GetTaskAnswer,
    ) -> Result<pb::GetTaskReply, Status> {
        match answer.answer {
            Some(Answer::Reply(reply)) => {
                *self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(stream);
                Ok(reply)
            }
            Some(Answer::Refused(refusal)) => Err(refusal_status(refusal)),
            None => Err(Status::internal("GetTaskStream: an ask answered with nothing")),
        }
    }
}

fn timed_out(timeout: Duration) -> Status {
    Status::deadline_exceeded(format!("no answer on the ask stream in {timeout:?}"))
}

impl OpenStream {
    async fn open(
        service: &mut ServiceClient,
        addr: &str,
        deadline: Instant,
    ) -> Result<Self, Failure> {
        let stream = CallStream::open(|asks| service.get_task_stream(asks), deadline).await?;
        Ok(Self { addr: addr.to_string(), stream })
    }

    async fn ask(
        &mut self,
        request: pb::GetTaskRequest,
        deadline: Instant,
    ) -> Result<pb::GetTaskAnswer, Failure> {
        self.stream.call(request, deadline).await
    }
}
