//! A list of RecordIO chunks that stores each file's path once: a dataset of a million
//! one-record chunks in one file is a million small spans and one path, not a million copies
//! of the path (which made the state, and so every snapshot, grow with path length x chunks).

use serde::{Deserialize, Serialize};

use super::dataset::ChunkRef;

/// One chunk, its file named by position in [`ChunkList::files`].
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSpan {
    /// Index into the list's files.
    pub file: u32,
    /// Where the chunk header starts in the file.
    pub offset: u64,
    /// The payload size from the header.
    pub compressed_size: u32,
    /// The record count from the header.
    pub record_count: u32,
}

/// Chunks in order, with the paths of their files kept once per run of chunks of one file.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct ChunkList {
    files: Vec<String>,
    chunks: Vec<ChunkSpan>,
    /// The sum of the files' path lengths, kept so admission checks stay O(1) per batch.
    path_bytes: u64,
}

impl ChunkList {
    /// The list of `chunks`, in order.
    pub fn from_refs(chunks: &[ChunkRef]) -> Self {
        let mut list = Self::default();
        for chunk in chunks {
            list.push(chunk);
        }
        list
    }

    /// Appends a chunk; its path is stored again only if it differs from the last chunk's.
    pub fn push(&mut self, chunk: &ChunkRef) {
        self.push_span(&chunk.path, chunk.offset, chunk.compressed_size, chunk.record_count);
    }

    /// Appends a chunk of `path` without building a [`ChunkRef`] (a scan of a million chunks
    /// of one file copies the path once, not a million times).
    pub fn push_span(&mut self, path: &str, offset: u64, compressed_size: u32, record_count: u32) {
        let file = match self.files.last() {
            Some(last) if last == path => self.files.len() - 1,
            _ => {
                self.files.push(path.to_string());
                self.path_bytes += path.len() as u64;
                self.files.len() - 1
            }
        };
        let file = u32::try_from(file).expect("file count is bounded by the chunk count");
        self.chunks.push(ChunkSpan { file, offset, compressed_size, record_count });
    }

    /// [`super::chunks_digest`] of the list, without building its [`ChunkRef`]s.
    pub fn digest(&self) -> u64 {
        super::dataset::list_digest(self)
    }

    /// Chunks `range` as a list of their own (a batch of a report).
    pub fn slice(&self, range: std::ops::Range<usize>) -> ChunkList {
        let mut list = ChunkList::default();
        for span in &self.chunks[range] {
            let path = self.path_of(span);
            list.push_span(path, span.offset, span.compressed_size, span.record_count);
        }
        list
    }

    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// The bytes of all stored paths: what a dataset's admission bounds besides the count.
    pub fn path_bytes(&self) -> u64 {
        self.path_bytes
    }

    /// What [`ChunkList::path_bytes`] would be after `extend_from(other, from)`.
    pub fn path_bytes_after_extending(&self, other: &ChunkList, from: usize) -> u64 {
        let mut last = self.files.last().map(String::as_str);
        let mut bytes = self.path_bytes;
        for (path, _) in other.iter().skip(from) {
            if last != Some(path) {
                bytes += path.len() as u64;
                last = Some(path);
            }
        }
        bytes
    }

    /// The longest stored path, in bytes.
    pub fn longest_path_bytes(&self) -> usize {
        self.files.iter().map(String::len).max().unwrap_or(0)
    }

    /// Every chunk with its path, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &ChunkSpan)> + '_ {
        self.chunks.iter().map(|span| (self.path_of(span), span))
    }

    /// Chunk `index` as a [`ChunkRef`], `None` past the end.
    pub fn get(&self, index: usize) -> Option<ChunkRef> {
        let span = self.chunks.get(index)?;
        Some(to_ref(self.path_of(span), span))
    }

    /// Chunks `range` as [`ChunkRef`]s.
    pub fn refs(&self, range: std::ops::Range<usize>) -> Vec<ChunkRef> {
        self.chunks[range].iter().map(|span| to_ref(self.path_of(span), span)).collect()
    }

    /// Whether chunk `index` is `chunk`.
    pub fn matches(&self, index: usize, chunk: (&str, &ChunkSpan)) -> bool {
        self.chunks.get(index).is_some_and(|span| {
            self.path_of(span) == chunk.0
                && (span.offset, span.compressed_size, span.record_count)
                    == (chunk.1.offset, chunk.1.compressed_size, chunk.1.record_count)
        })
    }

    /// Appends the chunks of `other` from its position `from` on.
    pub fn extend_from(&mut self, other: &ChunkList, from: usize) {
        for (path, span) in other.iter().skip(from) {
            self.push(&to_ref(path, span));
        }
    }

    /// Whether every span names a stored file and the path total is true: a list decoded
    /// from the network may be neither.
    pub fn is_well_formed(&self) -> bool {
        let path_bytes: u64 = self.files.iter().map(|path| path.len() as u64).sum();
        path_bytes == self.path_bytes
            && self.chunks.iter().all(|span| (span.file as usize) < self.files.len())
    }

    /// The record count of every chunk together.
    pub fn record_count(&self) -> u64 {
        self.chunks.iter().map(|span| u64::from(span.record_count)).sum()
    }

    fn path_of(&self, span: &ChunkSpan) -> &str {
        self.files.get(span.file as usize).map_or("", String::as_str)
    }
}

fn to_ref(path: &str, span: &ChunkSpan) -> ChunkRef {
    ChunkRef {
        path: path.to_string(),
        offset: span.offset,
        compressed_size: span.compressed_size,
        record_count: span.record_count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(path: &str, offset: u64) -> ChunkRef {
        ChunkRef { path: path.to_string(), offset, compressed_size: 10, record_count: 1 }
    }

    /// A run of chunks of one file stores the path once; the list gives back what went in.
    #[test]
    fn paths_are_stored_once_per_run() {
        let chunks = [chunk("a", 0), chunk("a", 30), chunk("b", 0), chunk("a", 60)];
        let list = ChunkList::from_refs(&chunks);
        assert_eq!(list.files, ["a", "b", "a"]);
        assert_eq!(list.refs(0..4), chunks);
        assert_eq!(list.get(2), Some(chunks[2].clone()));
        assert_eq!(list.get(4), None);
        assert_eq!(list.path_bytes(), 3);
        let mut tail = ChunkList::from_refs(&chunks[..1]);
        assert_eq!(tail.path_bytes_after_extending(&list, 1), 3);
        tail.extend_from(&list, 1);
        assert_eq!(tail, list);
        assert!(list.matches(3, ("a", &list.chunks[3])));
        assert!(!list.matches(3, ("b", &list.chunks[3])));
    }

    /// A span naming a file the list does not have is caught before anything uses it.
    #[test]
    fn spans_must_name_stored_files() {
        let mut list = ChunkList::from_refs(&[chunk("a", 0)]);
        assert!(list.is_well_formed());
        list.chunks[0].file = 1;
        assert!(!list.is_well_formed());
        let mut forged = ChunkList::from_refs(&[chunk("a", 0)]);
        forged.path_bytes = 0;
        assert!(!forged.is_well_formed());
    }
}
