//! The data plane's wire contract: the messages of `PushGrads`, `PullParams` and `PushPull`
//! written and read without tonic's codec buffers (`push_message.rs`, `pull_message.rs`), and
//! the paths both ends route by. The pserver serves them (`pserver/src/data_plane/`) and
//! `PServerClient` calls them; see there for why they bypass tonic's codec.

pub mod pull_message;
pub mod push_message;

use tonic::Status;

/// The paths of the data plane's calls.
pub const PUSH_GRADS_PATH: &str = "/raftrain.pserver.v1.PServerService/PushGrads";
pub const PULL_PARAMS_PATH: &str = "/raftrain.pserver.v1.PServerService/PullParams";
pub const PUSH_PULL_PATH: &str = "/raftrain.pserver.v1.PServerService/PushPull";

/// A small reply (`PushGradsReply`) or request (`PullParamsRequest`, block names only) is
/// at most this large.
pub const SMALL_MESSAGE_BYTES_MAX: usize = 16 << 20;

/// A message that is not what it claims, as the status the caller sees.
pub fn malformed(what: &str, error: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("{what} is not a valid message: {error}"))
}
