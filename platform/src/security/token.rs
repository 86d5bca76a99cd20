//! `Token`: the shared cluster secret from `--token-file`, sent as `authorization: Bearer ...`
//! on every call and checked by servers in constant time.

use std::fmt;
use std::path::Path;

use http::HeaderValue;

use super::SecurityError;

/// A token shorter than this is a guessable password, not a cluster secret.
pub const TOKEN_BYTES_MIN: usize = 16;
/// A token longer than this is a file given by mistake (an HTTP header carries it).
pub const TOKEN_BYTES_MAX: usize = 4096;

/// The cluster secret. Its `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// `Bearer <token>`, exactly what a client sends in `authorization`.
    header: HeaderValue,
}

impl Token {
    /// Reads the secret from `path`: surrounding whitespace (a trailing newline) is dropped;
    /// what is left must be 16 to 4096 visible ASCII characters.
    pub fn from_file(path: &Path) -> Result<Self, SecurityError> {
        let bytes = std::fs::read(path).map_err(|error| SecurityError::Read {
            flag: "--token-file",
            path: path.to_path_buf(),
            reason: error.to_string(),
        })?;
        Self::from_bytes(&bytes)
            .map_err(|reason| SecurityError::BadToken { path: path.to_path_buf(), reason })
    }

    /// The secret itself, checked as [`Token::from_file`] describes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let secret = bytes.trim_ascii();
        if secret.len() < TOKEN_BYTES_MIN || secret.len() > TOKEN_BYTES_MAX {
            return Err(format!(
                "the token is {} bytes; it must be {TOKEN_BYTES_MIN} to {TOKEN_BYTES_MAX} \
                 (make one with `head -c 32 /dev/urandom | base64`)",
                secret.len()
            ));
        }
        if let Some(offset) = secret.iter().position(|byte| !byte.is_ascii_graphic()) {
            return Err(format!(
                "byte {offset} of the token is not visible ASCII (no spaces or control bytes)"
            ));
        }
        let mut header = b"Bearer ".to_vec();
        header.extend_from_slice(secret);
        let header = HeaderValue::from_bytes(&header).map_err(|error| error.to_string())?;
        Ok(Self { header: header_sensitive(header) })
    }

    /// The `authorization` header value a client sends.
    pub fn header(&self) -> &HeaderValue {
        &self.header
    }

    /// Whether `presented` (a request's `authorization` value) is this token, in time that
    /// depends only on the lengths.
    pub fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(self.header.as_bytes(), presented)
    }
}

fn header_sensitive(mut header: HeaderValue) -> HeaderValue {
    header.set_sensitive(true);
    header
}

/// Equal slices, compared without an early exit on the first differing byte.
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    if expected.len() != presented.len() {
        return false;
    }
    let difference =
        expected.iter().zip(presented).fold(0u8, |acc, (left, right)| acc | (left ^ right));
    std::hint::black_box(difference) == 0
}

impl fmt::Debug for Token {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("Token(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token files: trimmed, bounded, visible ASCII; the header is `Bearer <token>`.
    #[test]
    fn token_rules() {
        let token = Token::from_bytes(b"  0123456789abcdef\n").expect("a valid token");
        assert_eq!(token.header().as_bytes(), b"Bearer 0123456789abcdef");
        assert!(token.header().is_sensitive());
        assert!(Token::from_bytes(b"short").unwrap_err().contains("5 bytes"));
        assert!(Token::from_bytes(&[b'x'; 5000]).unwrap_err().contains("5000 bytes"));
        let spaced = Token::from_bytes(b"0123456789 abcdef").unwrap_err();
        assert!(spaced.contains("byte 10"), "{spaced}");
        assert_eq!(format!("{token:?}"), "Token(<redacted>)");
    }

    /// Only the exact header matches: not a prefix, not another token, not the bare secret.
    #[test]
    fn matches_only_the_exact_header() {
        let token = Token::from_bytes(b"0123456789abcdef").expect("a valid token");
        assert!(token.matches(b"Bearer 0123456789abcdef"));
        assert!(!token.matches(b"Bearer 0123456789abcdeF"));
        assert!(!token.matches(b"Bearer 0123456789abcde"));
        assert!(!token.matches(b"0123456789abcdef"));
        assert!(!token.matches(b""));
    }
}
