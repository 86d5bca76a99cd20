//! `DecodedChunk`: one chunk's uncompressed payload and where each record lies in it. Records
//! are borrowed slices of one buffer, and the buffers are reused from chunk to chunk, so a
//! scan allocates nothing per record and nothing per chunk once warmed up.

use super::payload::Span;

#[derive(Debug, Default)]
pub struct DecodedChunk {
    /// The uncompressed payload: length prefixes and record bytes.
    pub(crate) payload: Vec<u8>,
    /// Where each record's bytes lie in `payload`.
    pub(crate) spans: Vec<Span>,
    /// The compressed bytes of the last chunk read, kept only for its allocation.
    pub(crate) compressed: Vec<u8>,
}

impl DecodedChunk {
    /// How many records the chunk holds.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The record at `index` within the chunk.
    pub fn record(&self, index: usize) -> Option<&[u8]> {
        self.spans.get(index).map(|span| &self.payload[span.range()])
    }

    /// The records in order.
    pub fn records(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.spans.iter().map(|span| &self.payload[span.range()])
    }

    /// Copies the records out, one vector each.
    pub fn to_records(&self) -> Vec<Vec<u8>> {
        self.records().map(<[u8]>::to_vec).collect()
    }
}
