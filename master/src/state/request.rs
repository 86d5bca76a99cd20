//! The envelope the leader proposes: who sent the command, the leader's clock, and the command.

use serde::{Deserialize, Serialize};

use super::codec::{self, DecodeError, REQUEST_BYTES_MAX};
use super::command::Command;

/// One entry of the replicated log, as the state machine applies it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Request {
    /// Who asked, for exactly-once replies; `None` for the leader's own decisions (expiry, lost
    /// trainers), which are never retried by a client.
    pub client: Option<ClientStamp>,
    /// The leader's clock when it proposed the entry: the only time the state machine sees.
    pub now_ms: u64,
    /// For the leader's own decisions (a trainer lost, a slot freed, tasks expired): the term
    /// in which its soft state justified them. Applied only if the entry was committed in that
    /// same term, so a decision computed before a leadership change never takes effect after
    /// it, without fresh leases. `None` for client requests.
    pub term: Option<u64>,
    /// What to do.
    pub command: Command,
}

impl Request {
    /// The request's parts, its command borrowed.
    pub(crate) fn envelope(&self) -> Envelope<'_> {
        Envelope {
            client: self.client,
            now_ms: self.now_ms,
            term: self.term,
            command: &self.command,
        }
    }
}

/// A request's parts with its command borrowed: how the group hands a job the command inside
/// an `InJob` envelope without copying it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Envelope<'a> {
    pub(crate) client: Option<ClientStamp>,
    pub(crate) now_ms: u64,
    pub(crate) term: Option<u64>,
    pub(crate) command: &'a Command,
}

impl<'a> Envelope<'a> {
    /// The same envelope around `command`.
    pub(crate) fn with_command(self, command: &'a Command) -> Self {
        Self { command, ..self }
    }
}

/// A client's identity and its per-client sequence number. A client retries with the same
/// `seq` and moves to the next one only after it saw a response.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientStamp {
    /// Chosen by the client, unique among live clients (for example random at start-up).
    pub client_id: u64,
    /// Grows by one per distinct request of this client.
    pub seq: u64,
}

/// The versioned wire form, borrowed for encoding. bincode encodes a borrowed and an owned
/// enum identically, so encoding needs no clone.
#[derive(Serialize)]
enum WireRequestRef<'a> {
    /// Never written: holds `V1`'s place so `V2` keeps its tag.
    #[allow(dead_code)]
    V1Retired,
    V2(&'a Request),
}

/// The versioned wire form. `V1` (before slot generations and decision terms) is retired: an
/// old entry decodes to the unit `V1Retired`, its trailing bytes are refused, and it is
/// answered `Rejected` like any undecodable entry, never misread as `V2`.
#[derive(Deserialize)]
enum WireRequest {
    V1Retired,
    V2(Request),
}

/// Encodes a request for the Raft log.
pub fn encode_request(request: &Request) -> Vec<u8> {
    codec::encode(&WireRequestRef::V2(request))
}

/// Decodes a request from the Raft log or the network. Never panics, whatever the bytes.
pub fn decode_request(bytes: &[u8]) -> Result<Request, DecodeError> {
    match codec::decode(bytes, REQUEST_BYTES_MAX, "request")? {
        WireRequest::V2(request) => Ok(request),
        WireRequest::V1Retired => Err(DecodeError::Retired { what: "request" }),
    }
}
