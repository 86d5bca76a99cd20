//! Block payloads on the wire: little-endian f32, checked for length and finiteness.

use thiserror::Error;

/// A payload that is not the block it claims to be.
#[derive(Debug, Error, PartialEq)]
pub enum PayloadError {
    #[error("{bytes} bytes is not a whole number of f32 values")]
    Ragged { bytes: usize },
    #[error("{got} values, the block has {want}")]
    Length { got: usize, want: usize },
    #[error("element {element} is {value} (not finite)")]
    NotFinite { element: usize, value: f32 },
}

/// The little-endian bytes of `values`.
pub fn encode(values: &[f32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(values.len() * 4);
    encode_into(values, &mut bytes);
    bytes
}

/// Appends the little-endian bytes of `values` to `bytes`: one copy on a little-endian
/// machine (no zeroing first).
pub fn encode_into(values: &[f32], bytes: &mut Vec<u8>) {
    #[cfg(target_endian = "little")]
    {
        use zerocopy::IntoBytes as _;
        bytes.extend_from_slice(values.as_bytes());
    }
    #[cfg(not(target_endian = "little"))]
    bytes.extend(values.iter().flat_map(|value| value.to_le_bytes()));
}

/// Decodes `bytes` into `into`, which must hold exactly as many values.
pub fn decode_into(bytes: &[u8], into: &mut [f32]) -> Result<(), PayloadError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(PayloadError::Ragged { bytes: bytes.len() });
    }
    if bytes.len() / 4 != into.len() {
        return Err(PayloadError::Length { got: bytes.len() / 4, want: into.len() });
    }
    for (value, word) in into.iter_mut().zip(bytes.chunks_exact(4)) {
        *value = f32::from_le_bytes([word[0], word[1], word[2], word[3]]);
    }
    Ok(())
}

/// Checks that `bytes` are exactly `want` finite values, without decoding them into memory.
pub fn check_finite(bytes: &[u8], want: usize) -> Result<(), PayloadError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(PayloadError::Ragged { bytes: bytes.len() });
    }
    if bytes.len() / 4 != want {
        return Err(PayloadError::Length { got: bytes.len() / 4, want });
    }
    let words =
        bytes.chunks_exact(4).map(|word| f32::from_le_bytes([word[0], word[1], word[2], word[3]]));
    match words.enumerate().find(|(_, value)| !value.is_finite()) {
        Some((element, value)) => Err(PayloadError::NotFinite { element, value }),
        None => Ok(()),
    }
}

/// Decodes exactly `want` finite values.
pub fn decode_finite(bytes: &[u8], want: usize) -> Result<Vec<f32>, PayloadError> {
    let values = decode(bytes, want)?;
    match values.iter().position(|value| !value.is_finite()) {
        Some(element) => Err(PayloadError::NotFinite { element, value: values[element] }),
        None => Ok(values),
    }
}

/// Decodes exactly `want` values.
pub fn decode(bytes: &[u8], want: usize) -> Result<Vec<f32>, PayloadError> {
    if !bytes.len().is_multiple_of(4) {
        return Err(PayloadError::Ragged { bytes: bytes.len() });
    }
    let mut values = vec![0.0; bytes.len() / 4];
    if values.len() != want {
        return Err(PayloadError::Length { got: values.len(), want });
    }
    decode_into(bytes, &mut values)?;
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refusals() {
        let values = [0.0, -1.5, f32::MIN_POSITIVE, 3.25e7];
        assert_eq!(decode_finite(&encode(&values), 4), Ok(values.to_vec()));
        assert_eq!(encode(&[1.0]), vec![0, 0, 0x80, 0x3f], "little-endian");
        let cases = [
            (vec![0_u8; 7], 2, PayloadError::Ragged { bytes: 7 }),
            (vec![0_u8; 8], 3, PayloadError::Length { got: 2, want: 3 }),
            (encode(&[1.0, f32::NAN]), 2, PayloadError::NotFinite { element: 1, value: f32::NAN }),
            (
                encode(&[f32::INFINITY]),
                1,
                PayloadError::NotFinite { element: 0, value: f32::INFINITY },
            ),
        ];
        for (bytes, want, error) in cases {
            let got = decode_finite(&bytes, want).expect_err("refused");
            // NaN != NaN, so compare the messages.
            assert_eq!(got.to_string(), error.to_string());
        }
    }
}
