//! [`read_message`]: the one gRPC message of a unary request or reply body, kept in the
//! DATA frames it arrived in (no copy into a decode buffer), with the body's trailers.
//!
//! The checks are tonic's: the announced length within the limit (seen as soon as the prefix
//! is in, before the rest is waited for), no compression, exactly one message, nothing cut
//! short.

use std::future::poll_fn;
use std::pin::Pin;

use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::Body;
use tonic::Status;

use super::protobuf::GRPC_PREFIX_BYTES;
use super::segments::Segments;

/// A body's message and trailers.
#[derive(Debug)]
pub struct Received {
    pub message: Segments,
    pub trailers: Option<HeaderMap>,
}

/// Reads `body` to its end: its one message (at most `message_bytes_max` bytes) and its
/// trailers. A body that fails ends the read with its status.
pub async fn read_message<B>(body: &mut B, message_bytes_max: usize) -> Result<Received, Status>
where
    B: Body<Data = Bytes, Error = Status> + Unpin,
{
    let mut bytes = Segments::default();
    let mut announced = None;
    let mut trailers = None;
    while let Some(frame) = poll_fn(|context| Pin::new(&mut *body).poll_frame(context)).await {
        let frame = match frame?.into_data() {
            Ok(data) => data,
            Err(frame) => {
                trailers = frame.into_trailers().ok();
                continue;
            }
        };
        bytes.push(frame);
        if announced.is_none() && bytes.len() >= GRPC_PREFIX_BYTES {
            announced = Some(prefix(&bytes, message_bytes_max)?);
        }
        if let Some(len) = announced {
            if bytes.len() > GRPC_PREFIX_BYTES + len {
                return Err(Status::internal("more than one message in a unary call"));
            }
        }
    }
    let len = match announced {
        Some(len) => len,
        None if bytes.is_empty() => return Err(Status::internal("Missing message.")),
        None => return Err(Status::internal("Unexpected EOF decoding stream.")),
    };
    if bytes.len() < GRPC_PREFIX_BYTES + len {
        return Err(Status::internal("Unexpected EOF decoding stream."));
    }
    bytes.advance(GRPC_PREFIX_BYTES);
    Ok(Received { message: bytes, trailers })
}

/// The message length a prefix announces, checked.
fn prefix(bytes: &Segments, message_bytes_max: usize) -> Result<usize, Status> {
    let mut prefix = [0_u8; GRPC_PREFIX_BYTES];
    for (target, byte) in prefix.iter_mut().zip(bytes.parts().flatten()) {
        *target = *byte;
    }
    let [flag, length @ ..] = prefix;
    match flag {
        0 => {}
        1 => return Err(Status::unimplemented("compressed messages are not accepted")),
        other => {
            return Err(Status::internal(format!(
                "protocol error: invalid compression flag {other}"
            )))
        }
    }
    let len = u32::from_be_bytes(length) as usize;
    if len > message_bytes_max {
        return Err(Status::out_of_range(format!(
            "Error, decoded message length too large: found {len} bytes, the limit is: \
             {message_bytes_max} bytes"
        )));
    }
    Ok(len)
}
