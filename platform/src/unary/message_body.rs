//! `MessageBody`: the HTTP/2 body of one gRPC message given as `Bytes` pieces, each handed to
//! h2 as a DATA frame of its own (h2 writes large ones from the caller's memory, vectored),
//! then, for a reply, the `grpc-status: 0` trailers.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body::{Body, Frame, SizeHint};

/// One message's pieces, then the trailers if any.
#[derive(Debug)]
pub struct MessageBody {
    parts: VecDeque<Bytes>,
    left: u64,
    trailers: Option<HeaderMap>,
}

impl MessageBody {
    /// A request: the message and the end of the stream.
    pub fn request(parts: Vec<Bytes>) -> Self {
        Self::new(parts, None)
    }

    /// A successful reply: the message, then `grpc-status: 0`.
    pub fn reply(parts: Vec<Bytes>) -> Self {
        let mut trailers = HeaderMap::new();
        trailers.insert("grpc-status", HeaderValue::from_static("0"));
        Self::new(parts, Some(trailers))
    }

    fn new(parts: Vec<Bytes>, trailers: Option<HeaderMap>) -> Self {
        let parts: VecDeque<Bytes> = parts.into_iter().filter(|part| !part.is_empty()).collect();
        let left = parts.iter().map(|part| part.len() as u64).sum();
        Self { parts, left, trailers }
    }
}

impl Body for MessageBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _context: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(part) = self.parts.pop_front() {
            self.left -= part.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(part))));
        }
        Poll::Ready(self.trailers.take().map(|trailers| Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.parts.is_empty() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}
