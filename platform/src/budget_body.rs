//! `BudgetBody`: a gRPC request body that takes, from its server's byte budget, the length
//! each message announces in its 5-byte prefix before the prefix reaches tonic's decoder (which
//! reserves that length at once), gives it back when the message has arrived or the call ends,
//! and fails the call if the whole body has not arrived by its deadline.
//!
//! A message that does not fit what is left of the budget waits (its prefix held back, so
//! nothing is reserved for it) for room, at most `BUDGET_WAIT_MS`, then the call is refused
//! (`RESOURCE_EXHAUSTED`, before any service saw it, so a client may retry). The wait is short
//! because a waiting call's unread bytes hold its connection's HTTP/2 flow-control window: a
//! long wait could starve the very calls whose end would make room. One message longer than
//! the whole budget is refused at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use crate::grpc_framing::GrpcFraming;

/// How long a message waits for room under the budget before its call is refused: a burst of
/// real requests finishing on a working network makes room within milliseconds.
const BUDGET_WAIT_MS: u64 = 1_000;

type Waited = Result<Result<OwnedSemaphorePermit, AcquireError>, tokio::time::error::Elapsed>;
type Acquire = Pin<Box<dyn Future<Output = Waited> + Send>>;
type Polled = Poll<Option<Result<Frame<Bytes>, tonic::Status>>>;

/// Bytes read from the client and not yet passed on: `bytes[..scanned]` are accounted for.
struct Unsent {
    bytes: Bytes,
    scanned: usize,
}

/// A request body under its server's budget and deadline.
pub struct BudgetBody<B> {
    inner: B,
    budget: Arc<Semaphore>,
    budget_bytes: u64,
    deadline: Pin<Box<Sleep>>,
    deadline_ms: u64,
    /// True once the body ended (or failed): no deadline after that.
    finished: bool,
    framing: GrpcFraming,
    unsent: Option<Unsent>,
    /// Waiting for the budget to admit the message just announced.
    acquiring: Option<Acquire>,
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
            framing: GrpcFraming::default(),
            unsent: None,
            acquiring: None,
            held: None,
        }
    }

    /// Accounts for the unsent bytes: all of them when every message they announce is
    /// admitted (returned to pass on), else those before the prefix that must wait (returned,
    /// if any), the rest kept with `acquiring` set.
    fn admit_unsent(&mut self) -> Result<Option<Bytes>, tonic::Status> {
        let Some(mut unsent) = self.unsent.take() else { return Ok(None) };
        while let Some((at, length)) =
            self.framing.next_announcement(&unsent.bytes[unsent.scanned..])
        {
            // A new prefix means the previous message has fully arrived.
            self.held = None;
            let completing = unsent.scanned + at;
            unsent.scanned = completing + 1;
            if u64::from(length) > self.budget_bytes {
                return Err(self.too_large(length));
            }
            if let Ok(permit) = self.budget.clone().try_acquire_many_owned(length) {
                self.held = Some(permit);
                continue;
            }
            let wait = std::time::Duration::from_millis(BUDGET_WAIT_MS);
            let acquire = self.budget.clone().acquire_many_owned(length);
            self.acquiring = Some(Box::pin(tokio::time::timeout(wait, acquire)));
            // The prefix's last byte stays back, so the decoder reserves nothing yet.
            let ready = unsent.bytes.split_to(completing);
            unsent.scanned -= completing;
            self.unsent = Some(unsent);
            return Ok((!ready.is_empty()).then_some(ready));
        }
        if self.framing.between_messages() {
            self.held = None;
        }
        Ok(Some(unsent.bytes))
    }

    fn too_large(&self, length: u32) -> tonic::Status {
        tonic::Status::resource_exhausted(format!(
            "a {length}-byte message is more than the {} bytes of unfinished requests this \
             server admits (--request-bytes-in-flight)",
            self.budget_bytes
        ))
    }

    fn no_room(&self) -> tonic::Status {
        tonic::Status::resource_exhausted(format!(
            "no room for this message within {BUDGET_WAIT_MS} ms: the server holds \
             {} bytes of unfinished requests (--request-bytes-in-flight); try again",
            self.budget_bytes
        ))
    }

    fn fail(&mut self, status: tonic::Status) -> Polled {
        self.finished = true;
        self.held = None;
        self.acquiring = None;
        self.unsent = None;
        Poll::Ready(Some(Err(status)))
    }

    /// `Ready` with the failure once the deadline has passed.
    fn poll_deadline(&mut self, context: &mut Context<'_>) -> Polled {
        if self.deadline.as_mut().poll(context).is_pending() {
            return Poll::Pending;
        }
        let waiting = if self.acquiring.is_some() {
            " while waiting for room under --request-bytes-in-flight"
        } else {
            ""
        };
        let message = format!(
            "the request did not arrive within {} ms (--request-body-ms){waiting}",
            self.deadline_ms
        );
        self.fail(tonic::Status::deadline_exceeded(message))
    }
}

impl<B> BudgetBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<tonic::Status>,
{
    /// One step: wait for the budget, pass on admitted bytes, or read more.
    fn poll_step(&mut self, context: &mut Context<'_>) -> Option<Polled> {
        if let Some(acquiring) = self.acquiring.as_mut() {
            match acquiring.as_mut().poll(context) {
                Poll::Pending => return Some(self.poll_deadline(context)),
                Poll::Ready(Ok(Ok(permit))) => {
                    self.acquiring = None;
                    self.held = Some(permit);
                }
                Poll::Ready(Ok(Err(closed))) => {
                    return Some(self.fail(tonic::Status::unavailable(closed.to_string())));
                }
                Poll::Ready(Err(_elapsed)) => {
                    let status = self.no_room();
                    return Some(self.fail(status));
                }
            }
        }
        if self.unsent.is_some() {
            return match self.admit_unsent() {
                Ok(Some(ready)) => Some(Poll::Ready(Some(Ok(Frame::data(ready))))),
                Ok(None) => None,
                Err(status) => Some(self.fail(status)),
            };
        }
        match Pin::new(&mut self.inner).poll_frame(context) {
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(bytes) => {
                    self.unsent = Some(Unsent { bytes, scanned: 0 });
                    None
                }
                Err(trailers) => {
                    self.finished = true;
                    Some(Poll::Ready(Some(Ok(trailers))))
                }
            },
            Poll::Ready(Some(Err(error))) => Some(self.fail(error.into())),
            Poll::Ready(None) => {
                self.finished = true;
                self.held = None;
                Some(Poll::Ready(None))
            }
            Poll::Pending => Some(self.poll_deadline(context)),
        }
    }
}

impl<B> Body for BudgetBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<tonic::Status>,
{
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(self: Pin<&mut Self>, context: &mut Context<'_>) -> Polled {
        let this = self.get_mut();
        if this.finished {
            return Pin::new(&mut this.inner).poll_frame(context).map_err(Into::into);
        }
        loop {
            if let Some(polled) = this.poll_step(context) {
                return polled;
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.unsent.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that yields `frames` and then ends.
    struct Frames(Vec<Bytes>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = tonic::Status;

        fn poll_frame(mut self: Pin<&mut Self>, _context: &mut Context<'_>) -> Polled {
            if self.0.is_empty() {
                return Poll::Ready(None);
            }
            Poll::Ready(Some(Ok(Frame::data(self.0.remove(0)))))
        }
    }

    fn body(budget: &Arc<Semaphore>, frames: &[&[u8]]) -> BudgetBody<Frames> {
        let deadline = tokio::time::sleep(std::time::Duration::from_secs(60));
        let frames = Frames(frames.iter().map(|frame| Bytes::copy_from_slice(frame)).collect());
        BudgetBody::new(frames, budget.clone(), 100, deadline)
    }

    async fn next(body: &mut BudgetBody<Frames>) -> Polled {
        std::future::poll_fn(|context| match Pin::new(&mut *body).poll_frame(context) {
            Poll::Pending => Poll::Ready(Poll::Pending),
            ready => Poll::Ready(ready),
        })
        .await
    }

    fn data(polled: Polled) -> Vec<u8> {
        match polled {
            Poll::Ready(Some(Ok(frame))) => {
                frame.into_data().map(|data| data.to_vec()).unwrap_or_default()
            }
            other => panic!("expected data, got {other:?}"),
        }
    }

    /// A message holds its announced length from its prefix (split across frames) until its
    /// last byte; one that does not fit waits with its prefix's last byte held back and goes
    /// on when room frees, or is refused when none frees in time; one longer than the whole
    /// budget is refused at once, naming the flag.
    #[tokio::test]
    async fn messages_hold_their_announced_length_until_they_arrive() {
        let budget = Arc::new(Semaphore::new(100));
        let mut first = body(&budget, &[&[0, 0, 0], &[0, 60, 1, 2], &[0; 58]]);
        assert_eq!(data(next(&mut first).await), [0, 0, 0]);
        assert_eq!(data(next(&mut first).await), [0, 60, 1, 2]);
        assert_eq!(budget.available_permits(), 40);

        let mut second = body(&budget, &[&[0, 0, 0, 0, 50, 7]]);
        assert_eq!(data(next(&mut second).await), [0, 0, 0, 0], "the last prefix byte waits");
        assert!(next(&mut second).await.is_pending(), "50 bytes do not fit in 40");
        assert_eq!(data(next(&mut first).await), [0; 58]);
        assert!(matches!(next(&mut first).await, Poll::Ready(None)));
        assert_eq!(data(next(&mut second).await), [50, 7], "room freed: the prefix goes on");
        assert_eq!(budget.available_permits(), 50);

        let mut third = body(&budget, &[&[0, 0, 0, 0, 101]]);
        match next(&mut third).await {
            Poll::Ready(Some(Err(refused))) => {
                assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
                assert!(refused.message().contains("--request-bytes-in-flight"), "{refused:?}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let mut fourth = body(&budget, &[&[0, 0, 0, 0, 51]]);
        assert_eq!(data(next(&mut fourth).await), [0, 0, 0, 0]);
        tokio::time::pause();
        match next(&mut fourth).await {
            Poll::Pending => {}
            other => panic!("expected a wait, got {other:?}"),
        }
        tokio::time::advance(std::time::Duration::from_millis(BUDGET_WAIT_MS + 1)).await;
        match next(&mut fourth).await {
            Poll::Ready(Some(Err(refused))) => {
                assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
                assert!(refused.message().contains("try again"), "{refused:?}");
            }
            other => panic!("expected a refusal after the wait, got {other:?}"),
        }
        drop(second);
        assert_eq!(budget.available_permits(), 100, "a dropped call gives its bytes back");
    }
}
