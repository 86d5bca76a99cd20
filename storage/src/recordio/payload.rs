//! The uncompressed chunk payload: each record as a `u32` little-endian length and its bytes.
//! The only place that encodes or decodes this layout; the writer and all readers share it.

use std::ops::Range;

use super::ErrorKind;

/// Where one record lies in a payload. `u32` offsets (payloads are capped far below 4 GiB) keep
/// the span list at 8 bytes a record: at ~100-byte records it is a tenth of the payload's
/// memory traffic, so its size shows in scan throughput.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    end: u32,
}

impl Span {
    pub(crate) fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// The size of the length prefix in front of every record.
pub(crate) const LENGTH_PREFIX_BYTES: usize = 4;

/// Appends one record to an uncompressed payload.
///
/// The caller has checked that the record's length fits a `u32`.
pub(crate) fn append_record(payload: &mut Vec<u8>, record: &[u8]) {
    let length = u32::try_from(record.len()).expect("the writer refuses records over u32::MAX");
    payload.extend_from_slice(&length.to_le_bytes());
    payload.extend_from_slice(record);
}

/// How many payload bytes a record of `record_bytes` bytes occupies.
pub(crate) fn encoded_bytes(record_bytes: usize) -> usize {
    LENGTH_PREFIX_BYTES.saturating_add(record_bytes)
}

/// Splits an uncompressed payload into owned records (what the tests compare against).
#[cfg(test)]
pub(crate) fn split_records(payload: &[u8], record_count: u32) -> Result<Vec<Vec<u8>>, ErrorKind> {
    let mut spans = Vec::new();
    record_spans(payload, record_count, &mut spans)?;
    Ok(spans.into_iter().map(|span| payload[span.range()].to_vec()).collect())
}

/// Finds where each record lies in an uncompressed payload, replacing the contents of `spans`
/// (whose allocation is reused). Checks that every record lies inside the payload and that
/// there are exactly `record_count` of them.
pub(crate) fn record_spans(
    payload: &[u8],
    record_count: u32,
    spans: &mut Vec<Span>,
) -> Result<(), ErrorKind> {
    spans.clear();
    // Every record takes at least its length prefix, so this bounds the allocation by the
    // payload actually present, whatever the header claims.
    spans.reserve((record_count as usize).min(payload.len() / LENGTH_PREFIX_BYTES));
    let position = parse_complete_records(payload, 0, spans);
    finish_spans(payload, position, record_count, spans)
}

/// Appends the spans of the whole records in `payload[position..]` and returns where the first
/// incomplete one starts: lets a reader parse a payload piece by piece as it arrives.
pub(crate) fn parse_complete_records(
    payload: &[u8],
    mut position: usize,
    spans: &mut Vec<Span>,
) -> usize {
    assert!(u32::try_from(payload.len()).is_ok(), "payloads are capped far below 4 GiB");
    while let Some(prefix) = payload.get(position..position + LENGTH_PREFIX_BYTES) {
        let length = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
        let start = position + LENGTH_PREFIX_BYTES;
        if payload.len() - start < length {
            break;
        }
        spans.push(Span { start: start as u32, end: (start + length) as u32 });
        position = start + length;
    }
    position
}

/// Checks the end of a fully parsed payload: nothing may be left over after the last whole
/// record at `position`, and the count must match the header.
pub(crate) fn finish_spans(
    payload: &[u8],
    position: usize,
    record_count: u32,
    spans: &[Span],
) -> Result<(), ErrorKind> {
    let found = u32::try_from(spans.len()).unwrap_or(u32::MAX);
    if let Some(rest) = payload.get(position..).filter(|rest| !rest.is_empty()) {
        let (length, remaining) = match rest.first_chunk::<LENGTH_PREFIX_BYTES>() {
            // A partial length prefix: the record needs four bytes to even say its length.
            None => (LENGTH_PREFIX_BYTES as u32, rest.len()),
            Some(prefix) => (u32::from_le_bytes(*prefix), rest.len() - LENGTH_PREFIX_BYTES),
        };
        return Err(ErrorKind::RecordOverrun {
            record: found,
            length,
            remaining: remaining as u64,
        });
    }
    if found != record_count {
        return Err(ErrorKind::RecordCountMismatch { header: record_count, found });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records round-trip through the payload layout, and every way a payload can disagree with
    /// itself or its header is reported as the right kind.
    #[test]
    fn split() {
        fn check(payload: &[u8], record_count: u32, expected: Result<Vec<&[u8]>, &str>) {
            let split = split_records(payload, record_count);
            match expected {
                Ok(records) => assert_eq!(split.expect("valid payload"), records),
                Err(message) => {
                    let kind = split.expect_err("invalid payload");
                    assert_eq!(format!("{kind:?}"), message);
                }
            }
        }
        let mut payload = Vec::new();
        for record in [&b"a"[..], b"", b"bc"] {
            append_record(&mut payload, record);
        }
        assert_eq!(payload, b"\x01\0\0\0a\0\0\0\0\x02\0\0\0bc");
        check(&payload, 3, Ok(vec![b"a", b"", b"bc"]));
        check(b"", 0, Ok(vec![]));
        check(&payload, 2, Err("RecordCountMismatch { header: 2, found: 3 }"));
        check(b"", 1, Err("RecordCountMismatch { header: 1, found: 0 }"));
        check(
            &payload[..payload.len() - 1],
            3,
            Err("RecordOverrun { record: 2, length: 2, remaining: 1 }"),
        );
        check(&payload[..2], 1, Err("RecordOverrun { record: 0, length: 4, remaining: 2 }"));
        check(
            b"\xff\xff\xff\xff",
            u32::MAX,
            Err("RecordOverrun { record: 0, length: 4294967295, remaining: 0 }"),
        );
        assert_eq!(encoded_bytes(2), 6);
        assert_eq!(encoded_bytes(usize::MAX), usize::MAX);
    }
}
