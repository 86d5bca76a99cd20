//! bincode with one set of options and a size limit, for everything this crate puts on disk
//! or on the wire: a length prefix from a corrupt file or a hostile peer cannot make it
//! allocate more than the limit.

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// No message, log entry or snapshot this crate decodes may be larger than this.
pub const DECODED_BYTES_MAX: u64 = 256 * 1024 * 1024;

fn options() -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding().with_limit(DECODED_BYTES_MAX)
}

/// Encodes a value; fails only for values over [`DECODED_BYTES_MAX`].
pub(crate) fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, bincode::Error> {
    options().serialize(value)
}

/// Decodes a value encoded by [`encode`]; trailing bytes are an error.
pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, bincode::Error> {
    options().deserialize(bytes)
}
