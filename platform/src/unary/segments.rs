//! `Segments`: one message's bytes as the pieces they arrived in (HTTP/2 DATA frames), handed
//! on without joining them: a field inside may span pieces, and taking it out copies nothing.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

/// Bytes kept as the `Bytes` pieces they came in. Cheap to clone (the pieces are shared).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segments {
    /// Never holds an empty piece.
    parts: VecDeque<Bytes>,
    len: usize,
}

impl Segments {
    /// Appends `bytes` (nothing is copied).
    pub fn push(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        self.len += bytes.len();
        self.parts.push_back(bytes);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pieces in order, each non-empty.
    pub fn parts(&self) -> Parts<'_> {
        Parts(self.parts.iter())
    }

    /// How many pieces the bytes are in.
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    /// Splits off the first `len` bytes, sharing the pieces (nothing is copied). `len` must
    /// be at most [`Segments::len`].
    pub fn split_to(&mut self, len: usize) -> Segments {
        assert!(len <= self.len, "taking {len} of {} bytes", self.len);
        let mut taken = Segments::default();
        while taken.len < len {
            let front = self.parts.front_mut().expect("len counts the pieces' bytes");
            let want = len - taken.len;
            if front.len() <= want {
                let whole = self.parts.pop_front().expect("the front exists");
                self.len -= whole.len();
                taken.push(whole);
            } else {
                self.len -= want;
                taken.push(front.split_to(want));
            }
        }
        taken
    }

    /// The bytes in one piece: free when they are in one already, a copy otherwise.
    pub fn into_contiguous(mut self) -> Bytes {
        let len = self.len;
        self.copy_to_bytes(len)
    }
}

/// The pieces of a [`Segments`], in order.
#[derive(Clone, Debug)]
pub struct Parts<'a>(std::collections::vec_deque::Iter<'a, Bytes>);

impl<'a> Iterator for Parts<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        self.0.next().map(Bytes::as_ref)
    }
}

impl From<Bytes> for Segments {
    fn from(bytes: Bytes) -> Self {
        let mut segments = Segments::default();
        segments.push(bytes);
        segments
    }
}

impl Buf for Segments {
    fn remaining(&self) -> usize {
        self.len
    }

    fn chunk(&self) -> &[u8] {
        self.parts.front().map_or(&[], Bytes::as_ref)
    }

    fn advance(&mut self, mut count: usize) {
        assert!(count <= self.len, "advancing {count} past {} bytes", self.len);
        self.len -= count;
        while count > 0 {
            let front = self.parts.front_mut().expect("len counts the pieces' bytes");
            if front.len() > count {
                front.advance(count);
                return;
            }
            count -= front.len();
            self.parts.pop_front();
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        let mut taken = self.split_to(len);
        if taken.parts.len() <= 1 {
            return taken.parts.pop_front().unwrap_or_default();
        }
        let mut joined = BytesMut::with_capacity(len);
        for part in &taken.parts {
            joined.extend_from_slice(part);
        }
        joined.freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(parts: &[&'static [u8]]) -> Segments {
        let mut segments = Segments::default();
        for part in parts {
            segments.push(Bytes::from_static(part));
        }
        segments
    }

    /// Taking bytes splits pieces where needed and keeps every byte once, in order, whatever
    /// the cut; empty pieces are never kept.
    #[test]
    fn take_splits_pieces_and_keeps_the_order() {
        /// Pieces, bytes taken, what is taken, what is left, pieces taken.
        type Case = (&'static [&'static [u8]], usize, &'static [u8], &'static [u8], usize);
        let cases: [Case; 4] = [
            (&[b"abc", b"", b"defg"], 2, b"ab", b"cdefg", 1),
            (&[b"abc", b"defg"], 3, b"abc", b"defg", 1),
            (&[b"abc", b"defg"], 5, b"abcde", b"fg", 2),
            (&[b"abc"], 0, b"", b"abc", 0),
        ];
        for (parts, len, taken, left, taken_parts) in cases {
            let mut segments = pieces(parts);
            let first = segments.split_to(len);
            assert_eq!(first.part_count(), taken_parts, "{parts:?} take {len}");
            assert_eq!(first.into_contiguous(), Bytes::from_static(taken));
            assert_eq!(segments.clone().into_contiguous(), Bytes::from_static(left));
            assert!(segments.parts().all(|part| !part.is_empty()));
        }
    }

    /// `Buf` reads across pieces as if they were one.
    #[test]
    fn reads_across_pieces() {
        let mut segments = pieces(&[b"\x01\x02", b"\x03\x04\x05"]);
        assert_eq!(segments.get_u32(), 0x0102_0304);
        assert_eq!(segments.remaining(), 1);
        assert_eq!(segments.chunk(), b"\x05");
    }
}
