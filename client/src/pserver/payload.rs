//! `Payload`: a block's little-endian f32 bytes wherever they are, one slice or the HTTP/2
//! frames they arrived in (a value may straddle two frames), and `F32Reader`, which decodes
//! them in order into the caller's memory: the shard applies a push straight from the frames,
//! and a client decodes a pull straight into its tensors.

use bytes::Bytes;
use platform::unary::{Parts, Segments};

use crate::pserver::f32_bytes::PayloadError;

/// Gradient or value elements decoded at a time where they are only visited (16 KiB).
pub const VISIT_CHUNK_ELEMENTS: usize = 4096;

/// Little-endian f32 bytes in one or more pieces.
pub trait Payload {
    type Parts<'a>: Iterator<Item = &'a [u8]>
    where
        Self: 'a;

    fn byte_len(&self) -> usize;
    fn parts(&self) -> Self::Parts<'_>;

    /// A reader from the first value.
    fn reader(&self) -> F32Reader<'_, Self::Parts<'_>> {
        F32Reader { parts: self.parts(), current: &[], carry: [0; 4], carry_len: 0 }
    }
}

impl Payload for &[u8] {
    type Parts<'a>
        = std::iter::Once<&'a [u8]>
    where
        Self: 'a;

    fn byte_len(&self) -> usize {
        self.len()
    }

    fn parts(&self) -> Self::Parts<'_> {
        std::iter::once(*self)
    }
}

impl Payload for Bytes {
    type Parts<'a> = std::iter::Once<&'a [u8]>;

    fn byte_len(&self) -> usize {
        self.len()
    }

    fn parts(&self) -> Self::Parts<'_> {
        std::iter::once(self.as_ref())
    }
}

impl Payload for Segments {
    type Parts<'a> = Parts<'a>;

    fn byte_len(&self) -> usize {
        self.len()
    }

    fn parts(&self) -> Parts<'_> {
        Segments::parts(self)
    }
}

/// Decodes a payload's values in order, across its pieces.
pub struct F32Reader<'a, I: Iterator<Item = &'a [u8]>> {
    parts: I,
    current: &'a [u8],
    /// The bytes of a value split between two pieces, gathered.
    carry: [u8; 4],
    carry_len: usize,
}

impl<'a, I: Iterator<Item = &'a [u8]>> F32Reader<'a, I> {
    /// Fills `out` with the next values; how many there were (fewer only at the end).
    pub fn read(&mut self, out: &mut [f32]) -> usize {
        let mut filled = 0;
        while filled < out.len() {
            if self.current.is_empty() {
                match self.parts.next() {
                    Some(part) => self.current = part,
                    None => break,
                }
                continue;
            }
            if self.carry_len > 0 || self.current.len() < 4 {
                let take = (4 - self.carry_len).min(self.current.len());
                self.carry[self.carry_len..self.carry_len + take]
                    .copy_from_slice(&self.current[..take]);
                self.carry_len += take;
                self.current = &self.current[take..];
                if self.carry_len == 4 {
                    out[filled] = f32::from_le_bytes(self.carry);
                    filled += 1;
                    self.carry_len = 0;
                }
                continue;
            }
            let words = (self.current.len() / 4).min(out.len() - filled);
            // Fixed-size chunks let the compiler turn this into plain vector loads.
            for (value, word) in
                out[filled..filled + words].iter_mut().zip(self.current.chunks_exact(4))
            {
                *value = f32::from_le_bytes([word[0], word[1], word[2], word[3]]);
            }
            self.current = &self.current[words * 4..];
            filled += words;
        }
        filled
    }
}

/// Checks that `payload` is exactly `want` values.
pub fn check_length(payload: &impl Payload, want: usize) -> Result<(), PayloadError> {
    let bytes = payload.byte_len();
    if !bytes.is_multiple_of(4) {
        return Err(PayloadError::Ragged { bytes });
    }
    if bytes / 4 != want {
        return Err(PayloadError::Length { got: bytes / 4, want });
    }
    Ok(())
}

/// Checks that `payload` is exactly `want` finite values, decoding a stack buffer at a time.
pub fn check_finite(payload: &impl Payload, want: usize) -> Result<(), PayloadError> {
    check_length(payload, want)?;
    let mut reader = payload.reader();
    let mut buffer = [0.0_f32; VISIT_CHUNK_ELEMENTS];
    let mut start = 0;
    loop {
        let read = reader.read(&mut buffer);
        if read == 0 {
            return Ok(());
        }
        if let Some(offset) = buffer[..read].iter().position(|value| !value.is_finite()) {
            return Err(PayloadError::NotFinite { element: start + offset, value: buffer[offset] });
        }
        start += read;
    }
}

/// Decodes `payload` into `into`, which must hold exactly as many values.
pub fn decode_into(payload: &impl Payload, into: &mut [f32]) -> Result<(), PayloadError> {
    check_length(payload, into.len())?;
    let read = payload.reader().read(into);
    assert_eq!(read, into.len(), "the length was checked");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pserver::f32_bytes;

    /// Values decode the same however their bytes are cut into pieces, a value split between
    /// pieces included; the first value that is not finite is named by its index.
    #[test]
    fn values_decode_the_same_however_the_bytes_are_cut() {
        let values: Vec<f32> = (0..11).map(|i| i as f32 * 1.5 - 4.0).collect();
        let bytes = Bytes::from(f32_bytes::encode(&values));
        for first in 0..bytes.len() {
            for second in first..bytes.len() {
                let mut pieces = Segments::from(bytes.slice(..first));
                pieces.push(bytes.slice(first..second));
                pieces.push(bytes.slice(second..));
                let mut decoded = vec![0.0; values.len()];
                decode_into(&pieces, &mut decoded).expect("whole values");
                assert_eq!(decoded, values, "cut at {first} and {second}");
                assert_eq!(check_finite(&pieces, values.len()), Ok(()));
            }
        }
        let mut bad = values.clone();
        bad[9] = f32::INFINITY;
        let bad = Bytes::from(f32_bytes::encode(&bad));
        let mut pieces = Segments::from(bad.slice(..37));
        pieces.push(bad.slice(37..));
        let error = check_finite(&pieces, values.len()).expect_err("refused");
        assert_eq!(error, PayloadError::NotFinite { element: 9, value: f32::INFINITY });
        let short = bytes.slice(..43);
        assert_eq!(check_finite(&short, 11), Err(PayloadError::Ragged { bytes: 43 }));
    }
}
