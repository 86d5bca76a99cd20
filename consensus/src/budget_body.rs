//! `BudgetBody`: a gRPC request body that takes, from its server's byte budget, the length
//! each message announces in its 5-byte prefix before the prefix reaches tonic's decoder (which
//! reserves that length at once), gives it back when the message has arrived or the call ends,
//! and fails the call if the whole body has not arrived by its deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

/// The gRPC message prefix: a compression flag and a big-endian u32 length.
const PREFIX_BYTES: usize = 5;

/// A request body under its server's budget and deadline.
pub struct BudgetBody<B> {
    inner: B,
    budget: Arc<Semaphore>,
    budget_bytes: u64,
    deadline: Pin<Box<Sleep>>,
    deadline_ms: u64,
    /// True once the body ended (or failed): no deadline after that.
    finished: bool,
    prefix: [u8; PREFIX_BYTES],
    prefix_len: usize,
    /// Bytes of the current message still to come.
    message_left: u64,
    /// The current message's share of the budget.
    held: Option<OwnedSemaphorePermit>,
}

impl<B> BudgetBody<B> {
    pub(crate) fn new(
        inner: B,
        budget: Arc<Semaphore>,
        budget_bytes: u64,
        deadline: Sleep,
    ) -> Self {
        let deadline_ms =
            deadline.deadline().saturating_duration_since(tokio::time::Instant::now()).as_millis()
                as u64;
        Self {
            inner,
            budget,
            budget_bytes,
            deadline: Box::pin(deadline),
            deadline_ms,
            finished: false,
            prefix: [0; PREFIX_BYTES],
            prefix_len: 0,
            message_left: 0,
            held: None,
        }
    }

    /// Follows the messages through `data`, taking each announced length from the budget.
    fn account(&mut self, data: &[u8]) -> Result<(), tonic::Status> {
        let mut at = 0;
        while at < data.len() {
            if self.message_left > 0 {
                let take = self.message_left.min((data.len() - at) as u64);
                self.message_left -= take;
                at += take as usize;
                if self.message_left == 0 {
                    self.held = None;
                }
                continue;
            }
            self.prefix[self.prefix_len] = data[at];
            self.prefix_len += 1;
            at += 1;
            if self.prefix_len == PREFIX_BYTES {
                self.prefix_len = 0;
                let [_, length @ ..] = self.prefix;
                self.admit(u32::from_be_bytes(length))?;
            }
        }
        Ok(())
    }

    /// Takes `length` bytes from the budget for the message just announced.
    fn admit(&mut self, length: u32) -> Result<(), tonic::Status> {
        if length == 0 {
            return Ok(());
        }
        match self.budget.clone().try_acquire_many_owned(length) {
            Ok(permit) => {
                self.held = Some(permit);
                self.message_left = u64::from(length);
                Ok(())
            }
            Err(_) => Err(tonic::Status::resource_exhausted(format!(
                "the server already holds {} bytes of unfinished requests \
                 (--request-bytes-in-flight); a {length}-byte message does not fit; try again",
                self.budget_bytes
            ))),
        }
    }

    fn fail(&mut self, status: tonic::Status) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        self.finished = true;
        self.held = None;
        Poll::Ready(Some(Err(status)))
    }
}

impl<B> Body for BudgetBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<tonic::Status>,
{
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.finished {
            return Pin::new(&mut this.inner).poll_frame(context).map_err(Into::into);
        }
        match Pin::new(&mut this.inner).poll_frame(context) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Err(status) = this.account(data) {
                        return this.fail(status);
                    }
                }
                if frame.is_trailers() {
                    this.finished = true;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                this.finished = true;
                this.held = None;
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                this.finished = true;
                this.held = None;
                Poll::Ready(None)
            }
            Poll::Pending => match this.deadline.as_mut().poll(context) {
                Poll::Ready(()) => {
                    let message = format!(
                        "the request did not arrive within {} ms (--request-body-ms)",
                        this.deadline_ms
                    );
                    this.fail(tonic::Status::deadline_exceeded(message))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(budget: &Arc<Semaphore>) -> BudgetBody<tonic::body::Body> {
        let deadline = tokio::time::sleep(std::time::Duration::from_secs(60));
        BudgetBody::new(tonic::body::Body::empty(), budget.clone(), 100, deadline)
    }

    /// A message holds its announced length from its prefix (even one split across frames)
    /// until its last byte; a message longer than what is left is refused, naming the flag.
    #[tokio::test]
    async fn messages_hold_their_announced_length_until_they_arrive() {
        let budget = Arc::new(Semaphore::new(100));
        let mut body = body(&budget);
        body.account(&[0, 0, 0]).expect("half a prefix");
        assert_eq!(budget.available_permits(), 100);
        body.account(&[0, 60, 1, 2]).expect("the rest of the prefix and two bytes");
        assert_eq!(budget.available_permits(), 40);
        body.account(&[0; 58]).expect("the rest of the message");
        assert_eq!(budget.available_permits(), 100);
        body.account(&[0, 0, 0, 0, 70]).expect("a second message");
        let mut other = self::body(&budget);
        let refused = other.account(&[0, 0, 0, 0, 31]).expect_err("31 bytes do not fit in 30");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("--request-bytes-in-flight"), "{refused:?}");
        drop(body);
        assert_eq!(budget.available_permits(), 100, "a dropped call gives its bytes back");
    }
}
