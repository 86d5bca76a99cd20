//! How the log store stores an appended entry: its key and its encoding, every entry of an
//! append checked before any is stored.

use openraft::{AnyError, StorageIOError};

use super::{log_key, ENTRY_BYTES_MAX};
use crate::codec;
use crate::type_config::{Entry, StorageError};

/// One entry as stored: its key and its encoding.
pub(super) type StoredEntry = ([u8; 12], Vec<u8>);

/// The keys and encodings of `entries`, which must be consecutive: all of them checked before
/// any is stored.
// openraft's trait methods return its (large) `StorageError`; boxing it here would only move
// the allocation.
#[allow(clippy::result_large_err)]
pub(super) fn encoded_entries(entries: &[Entry]) -> Result<Vec<StoredEntry>, StorageError> {
    let mut encoded = Vec::with_capacity(entries.len());
    let mut previous: Option<u64> = None;
    for entry in entries {
        // Cheap, and everything after relies on it: a gap would be read back as a log.
        let index = entry.log_id.index;
        assert!(
            previous.is_none_or(|previous| index == previous + 1),
            "openraft appends consecutive entries: {index} after {previous:?}"
        );
        previous = Some(index);
        let bytes = codec::encode(entry).map_err(|error| StorageIOError::write_logs(&error))?;
        if bytes.len() > ENTRY_BYTES_MAX {
            let reason =
                format!("entry {} is {} bytes, over {ENTRY_BYTES_MAX}", entry.log_id, bytes.len());
            return Err(StorageIOError::write_logs(AnyError::error(reason)).into());
        }
        encoded.push((log_key(entry.log_id.index), bytes));
    }
    Ok(encoded)
}
