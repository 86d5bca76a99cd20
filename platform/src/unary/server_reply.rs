//! The server's side of a unary call served without tonic's codec: the request's message as
//! it arrived ([`read_request`]) and a reply from `Bytes` pieces or a status ([`reply`]).

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::HeaderValue;
use tonic::Status;

use super::message_body::MessageBody;
use super::read_message::read_message;
use super::segments::Segments;

/// The request's one message, at most `message_bytes_max` bytes.
pub async fn read_request(
    request: http::Request<tonic::body::Body>,
    message_bytes_max: usize,
) -> Result<Segments, Status> {
    let mut body = request.into_body();
    Ok(read_message(&mut body, message_bytes_max).await?.message)
}

/// The reply: the message (from `MessageWriter::finish`) and `grpc-status: 0`, or a
/// trailers-only status (where the RPC metrics layer reads it).
pub fn reply(answer: Result<Vec<Bytes>, Status>) -> http::Response<tonic::body::Body> {
    match answer {
        Ok(message) => {
            let body = tonic::body::Body::new(MessageBody::reply(message));
            let mut response = http::Response::new(body);
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
            response
        }
        Err(status) => status.into_http(),
    }
}
