//! The compressor applied to a chunk's payload, and the only code that compresses or
//! decompresses payloads.

use std::fmt;
use std::io::{Read, Write};
use std::str::FromStr;

/// How a chunk's payload is compressed; the numeric codes are those of PaddlePaddle/recordio.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Compressor {
    /// The payload is stored as is.
    None = 0,
    /// Snappy in the *framing* format, as Go's `snappy.NewBufferedWriter` writes it.
    Snappy = 1,
    /// gzip (RFC 1952), as Go's `compress/gzip` writes it.
    Gzip = 2,
}

/// The names accepted by [`Compressor::from_str`], in code order.
const NAMES: [(&str, Compressor); 3] =
    [("none", Compressor::None), ("snappy", Compressor::Snappy), ("gzip", Compressor::Gzip)];

impl Compressor {
    /// The code stored in a chunk header.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The compressor for a header code, or `None` for a code this format does not define.
    pub fn from_code(code: u32) -> Option<Self> {
        NAMES.iter().map(|&(_, compressor)| compressor).find(|compressor| compressor.code() == code)
    }

    /// The lower-case name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Compressor::None => "none",
            Compressor::Snappy => "snappy",
            Compressor::Gzip => "gzip",
        }
    }

    /// Compresses a whole uncompressed payload.
    pub(crate) fn compress(self, uncompressed: &[u8]) -> std::io::Result<Vec<u8>> {
        match self {
            Compressor::None => Ok(uncompressed.to_vec()),
            Compressor::Snappy => {
                let mut encoder = snap::write::FrameEncoder::new(Vec::new());
                encoder.write_all(uncompressed)?;
                encoder.into_inner().map_err(|error| error.into_error())
            }
            Compressor::Gzip => {
                let mut encoder =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(uncompressed)?;
                encoder.finish()
            }
        }
    }

    /// Decompresses a payload into `output` (replacing its contents, reusing its allocation),
    /// failing with [`Decompressed::TooLarge`] as soon as the output would exceed `bytes_max`,
    /// so a hostile payload costs at most `bytes_max` bytes of memory.
    pub(crate) fn decompress_into(
        self,
        compressed: &[u8],
        output: &mut Vec<u8>,
        bytes_max: usize,
    ) -> std::io::Result<Decompressed> {
        let limit = bytes_max as u64 + 1;
        output.clear();
        match self {
            Compressor::None => {
                output.extend_from_slice(&compressed[..compressed.len().min(limit as usize)])
            }
            Compressor::Snappy => {
                snap::read::FrameDecoder::new(compressed).take(limit).read_to_end(output)?;
            }
            // Go's gzip reader accepts concatenated members, so this one does too.
            Compressor::Gzip => {
                flate2::read::MultiGzDecoder::new(compressed).take(limit).read_to_end(output)?;
            }
        }
        if output.len() > bytes_max {
            return Ok(Decompressed::TooLarge { size_at_least: output.len() as u64 });
        }
        Ok(Decompressed::Complete)
    }
}

/// The outcome of [`Compressor::decompress_into`] for a payload that is well-formed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decompressed {
    /// The whole uncompressed payload is in the output buffer.
    Complete,
    /// The payload expands beyond the limit; decoding stopped at `size_at_least` bytes.
    TooLarge { size_at_least: u64 },
}

impl fmt::Display for Compressor {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// A compressor name that is not one of `none`, `snappy`, `gzip`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compressor {name:?}: expected one of none, snappy, gzip")]
pub struct ParseCompressorError {
    /// The name as given.
    pub name: String,
}

impl FromStr for Compressor {
    type Err = ParseCompressorError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        NAMES
            .iter()
            .find(|(known, _)| *known == name)
            .map(|&(_, compressor)| compressor)
            .ok_or_else(|| ParseCompressorError { name: name.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names, codes and `Display` agree for every compressor, and unknown names and codes are
    /// refused with a message listing the choices.
    #[test]
    fn names_and_codes() {
        fn check(name: &str, expected: Option<(Compressor, u32)>) {
            let parsed = name.parse::<Compressor>();
            match expected {
                Some((compressor, code)) => {
                    assert_eq!(parsed, Ok(compressor));
                    assert_eq!(compressor.code(), code);
                    assert_eq!(Compressor::from_code(code), Some(compressor));
                    assert_eq!(compressor.to_string(), name);
                }
                None => {
                    let message = parsed.expect_err("unknown name").to_string();
                    assert!(message.contains("none, snappy, gzip"), "{message}");
                }
            }
        }
        check("none", Some((Compressor::None, 0)));
        check("snappy", Some((Compressor::Snappy, 1)));
        check("gzip", Some((Compressor::Gzip, 2)));
        check("Gzip", None);
        check("zstd", None);
        check("", None);
        assert_eq!(Compressor::from_code(3), None);
        assert_eq!(Compressor::from_code(u32::MAX), None);
    }

    /// Decompression stops one byte past the limit: a payload that expands to exactly the limit
    /// is accepted, one byte more is refused without decoding the rest.
    #[test]
    fn decompress_limit() {
        fn check(compressor: Compressor, size: usize, bytes_max: usize, accepted: bool) {
            let uncompressed = vec![0u8; size];
            let compressed = compressor.compress(&uncompressed).expect("compress in memory");
            let mut payload = vec![7u8; 3];
            let outcome = compressor.decompress_into(&compressed, &mut payload, bytes_max);
            match outcome.expect("well-formed") {
                Decompressed::Complete => {
                    assert!(accepted, "{compressor} {size} {bytes_max}");
                    assert_eq!(payload, uncompressed);
                }
                Decompressed::TooLarge { size_at_least } => {
                    assert!(!accepted, "{compressor} {size} {bytes_max}");
                    assert!(size_at_least > bytes_max as u64);
                }
            }
        }
        for compressor in [Compressor::None, Compressor::Snappy, Compressor::Gzip] {
            check(compressor, 0, 0, true);
            check(compressor, 1000, 1000, true);
            check(compressor, 1001, 1000, false);
            check(compressor, 1 << 20, 4096, false);
        }
    }
}
