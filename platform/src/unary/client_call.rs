//! [`call`]: one unary gRPC call whose request goes to h2 as the caller's `Bytes` pieces and
//! whose reply comes back in the DATA frames it arrived in. Statuses are tonic's: a channel
//! that is not ready is `UNKNOWN`, a failed call is classified by `Status::from_error`
//! (connection errors are `UNAVAILABLE`), trailers-only replies and trailers carry the status.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, TE};
use http::{HeaderValue, Method, StatusCode, Uri, Version};
use tonic::{Code, Status};
use tower::{Service, ServiceExt as _};

use super::message_body::MessageBody;
use super::read_message::read_message;
use super::segments::Segments;
use crate::security::RpcChannel;

/// Calls `path` (`/package.Service/Method`) with `message` (from `MessageWriter::finish`);
/// the reply's message, at most `reply_bytes_max` bytes.
pub async fn call(
    channel: &mut RpcChannel,
    path: &'static str,
    message: Vec<Bytes>,
    reply_bytes_max: usize,
) -> Result<Segments, Status> {
    let mut request = http::Request::new(tonic::body::Body::new(MessageBody::request(message)));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = Uri::from_static(path);
    *request.version_mut() = Version::HTTP_2;
    let headers = request.headers_mut();
    headers.insert(TE, HeaderValue::from_static("trailers"));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    let ready = channel
        .ready()
        .await
        .map_err(|error| Status::unknown(format!("Service was not ready: {error}")))?;
    let response = ready.call(request).await.map_err(Status::from_error)?;
    let (head, mut body) = response.into_parts();
    if let Some(status) = Status::from_header_map(&head.headers) {
        if status.code() != Code::Ok {
            return Err(status);
        }
    }
    if head.status != StatusCode::OK {
        return Err(status_of_http(head.status));
    }
    let received = read_message(&mut body, reply_bytes_max).await?;
    match received.trailers.as_ref().and_then(Status::from_header_map) {
        Some(status) if status.code() == Code::Ok => Ok(received.message),
        Some(status) => Err(status),
        None => Err(Status::internal("the reply ended without a grpc-status")),
    }
}

/// gRPC's mapping of an HTTP status that is not 200 (the gRPC over HTTP/2 specification).
fn status_of_http(status: StatusCode) -> Status {
    let code = match status.as_u16() {
        400 => Code::Internal,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::Unimplemented,
        429 | 502 | 503 | 504 => Code::Unavailable,
        _ => Code::Unknown,
    };
    Status::new(code, format!("HTTP status {status} from the server"))
}
