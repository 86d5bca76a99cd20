//! Lowercase hexadecimal, the line format of `recordio write` and `recordio cat --hex`.

use std::fmt::Write as _;

/// Encodes bytes as lowercase hex, two digits a byte.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        write!(out, "{byte:02x}").expect("writing to a String cannot fail");
    }
    out
}

/// Decodes hex (either case); the error names the first bad character's column (1-based).
pub(crate) fn decode(text: &str) -> Result<Vec<u8>, String> {
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("odd number of hex digits ({})", digits.len()));
    }
    let mut out = Vec::with_capacity(digits.len() / 2);
    for (pair_index, pair) in digits.chunks_exact(2).enumerate() {
        let high = digit(pair[0]).ok_or_else(|| bad_digit(pair[0], pair_index * 2))?;
        let low = digit(pair[1]).ok_or_else(|| bad_digit(pair[1], pair_index * 2 + 1))?;
        out.push(high << 4 | low);
    }
    Ok(out)
}

fn digit(character: u8) -> Option<u8> {
    match character {
        b'0'..=b'9' => Some(character - b'0'),
        b'a'..=b'f' => Some(character - b'a' + 10),
        b'A'..=b'F' => Some(character - b'A' + 10),
        _ => None,
    }
}

fn bad_digit(character: u8, position: usize) -> String {
    format!("column {}: {:?} is not a hex digit", position + 1, char::from(character))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decoding undoes encoding, and bad input names its column.
    #[test]
    fn round_trip_and_errors() {
        let bytes: Vec<u8> = (0..=255).collect();
        assert_eq!(decode(&encode(&bytes)).unwrap(), bytes);
        assert_eq!(decode("00FFab").unwrap(), vec![0x00, 0xff, 0xab]);
        assert_eq!(decode("").unwrap(), Vec::<u8>::new());
        let check = |input: &str, expected: &str| assert_eq!(decode(input).unwrap_err(), expected);
        check("abc", "odd number of hex digits (3)");
        check("0g", "column 2: 'g' is not a hex digit");
        check("zz", "column 1: 'z' is not a hex digit");
    }
}
