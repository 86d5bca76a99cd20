//! The one bincode configuration every replica uses, so equal values always give equal bytes.
//!
//! bincode 1's free functions (`bincode::serialize`) use fixed-width integers while
//! `DefaultOptions` uses varints; mixing them would make two replicas (or a snapshot and its
//! reader) disagree, so every encode and decode in the state machine goes through this module.

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::violation::InvariantViolation;

/// The largest encoded request or response accepted. A Raft entry carries one request; the
/// biggest legitimate one is a dataset report listing every chunk.
pub const REQUEST_BYTES_MAX: u64 = 16 << 20;

/// The largest encoded state (a snapshot) the admission limits allow: every limit (chunk
/// count and path bytes, failure reason budget, trainers, sessions, slots) was chosen so that
/// the largest admitted state stays below this (`state::limits` builds it and measures), and
/// this stays below what the consensus layer can build, store, send and install (asserted at
/// compile time below). A state that could not be snapshotted is refused at admission.
pub const SNAPSHOT_BYTES_MAX: u64 = 160 << 20;

const _: () = assert!(
    SNAPSHOT_BYTES_MAX < consensus::STATE_SNAPSHOT_BYTES_MAX as u64,
    "the master's largest state must fit the consensus layer's snapshot limit with room for its meta"
);

/// Bytes that are not a valid encoding of what was expected. Fatal for the caller: unlike a
/// [`super::Response`], nothing was applied.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The input is longer than the limit for its kind, so it was not even parsed.
    #[error("{what} is {size} bytes, more than the {size_max} bytes allowed")]
    TooLarge { what: &'static str, size: u64, size_max: u64 },
    /// bincode rejected the bytes (truncated, bad tag, invalid UTF-8, trailing bytes, ...).
    #[error("malformed {what}")]
    Malformed {
        what: &'static str,
        #[source]
        source: bincode::Error,
    },
    /// The bytes are a layout this build no longer reads.
    #[error("{what} is in a retired layout written by an older raftrain")]
    Retired { what: &'static str },
    /// A snapshot decoded but describes a state the state machine can never reach.
    #[error("snapshot decoded to an inconsistent state")]
    Inconsistent(#[from] InvariantViolation),
}

/// Varint integers, little endian, and no trailing bytes: a second encoding of the same value
/// cannot hide behind garbage appended to it.
fn options() -> impl Options {
    bincode::DefaultOptions::new().with_varint_encoding().reject_trailing_bytes()
}

/// Encodes a value. Cannot fail: every type passed here is a plain derived `Serialize` made of
/// integers, strings and sequences of known length, and no size limit is set when encoding.
pub(crate) fn encode<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    options().serialize(value).expect("derived Serialize of owned data into a Vec cannot fail")
}

/// Decodes a value, refusing inputs over `size_max` before looking at them and bounding what
/// bincode may read (and so allocate) to the same limit.
pub(crate) fn decode<T: DeserializeOwned>(
    bytes: &[u8],
    size_max: u64,
    what: &'static str,
) -> Result<T, DecodeError> {
    let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if size > size_max {
        return Err(DecodeError::TooLarge { what, size, size_max });
    }
    options()
        .with_limit(size_max)
        .deserialize(bytes)
        .map_err(|source| DecodeError::Malformed { what, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `bytes` as a `Vec<String>` with `size_max` and compares the outcome's shape.
    fn check(bytes: &[u8], size_max: u64, expected: Option<Vec<String>>) {
        let decoded: Result<Vec<String>, DecodeError> = decode(bytes, size_max, "test value");
        match (decoded, expected) {
            (Ok(actual), Some(expected)) => assert_eq!(actual, expected),
            (Err(_), None) => {}
            (actual, expected) => panic!("bytes {bytes:?}: got {actual:?}, want {expected:?}"),
        }
    }

    /// Round trips succeed, and truncated, oversized, padded or hostile inputs are errors.
    #[test]
    fn decode_accepts_exact_encodings_only() {
        let value = vec!["a".to_string(), "bc".to_string()];
        let bytes = encode(&value);
        check(&bytes, 1024, Some(value.clone()));
        check(&bytes[..bytes.len() - 1], 1024, None);
        check(&bytes, 2, None);
        let mut padded = bytes.clone();
        padded.push(0);
        check(&padded, 1024, None);
        // A varint length prefix of 2^64 - 1 elements must fail, not allocate.
        check(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff], 1024, None);
        // A string claiming 2^32 bytes.
        check(&[1, 0xfc, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], 1024, None);
    }

    /// Integers are varint encoded, so the configuration cannot silently fall back to fixint.
    #[test]
    fn integers_are_varint() {
        assert_eq!(encode(&7u64), vec![7]);
        assert_eq!(encode(&300u64), vec![251, 44, 1]);
    }
}
