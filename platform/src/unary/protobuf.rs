//! Protobuf's wire format, as much as a data-plane message needs: read fields out of
//! [`Segments`] (a length-delimited field comes out as `Segments` sharing the pieces) and write
//! a message whose large `bytes` fields are handed on as the caller's own `Bytes`.
//!
//! A field that appears twice is read twice (the caller keeps the last, as protobuf's merge
//! does for scalars and `bytes`); unknown fields are skipped; groups (deprecated wire types 3
//! and 4) are refused.

use bytes::{BufMut, Bytes, BytesMut};
use prost::encoding::{decode_varint, encode_varint, encoded_len_varint};
use thiserror::Error;

use super::segments::Segments;

/// The gRPC prefix: a compression flag and a big-endian u32 length.
pub const GRPC_PREFIX_BYTES: usize = 5;

/// A shared `bytes` field at most this long is copied into the message's gathered bytes.
const COPIED_FIELD_BYTES_MAX: usize = 16 << 10;

/// One field's value as it is on the wire.
#[derive(Debug, PartialEq)]
pub enum WireValue {
    Varint(u64),
    Fixed64(u64),
    Fixed32(u32),
    /// `bytes`, `string` or a nested message, sharing the message's pieces.
    LengthDelimited(Segments),
}

/// Why bytes are not a protobuf message.
#[derive(Debug, Error, PartialEq)]
pub enum WireError {
    #[error("the message ends inside a field")]
    Truncated,
    #[error("a varint runs past 10 bytes")]
    Varint,
    #[error("field number 0")]
    FieldZero,
    #[error("field {field} has wire type {wire_type}, which is not supported")]
    WireType { field: u32, wire_type: u8 },
    #[error("field {field} is {got:?}, a {want} was expected")]
    Unexpected { field: u32, got: &'static str, want: &'static str },
}

impl WireValue {
    fn kind(&self) -> &'static str {
        match self {
            WireValue::Varint(_) => "varint",
            WireValue::Fixed64(_) => "fixed64",
            WireValue::Fixed32(_) => "fixed32",
            WireValue::LengthDelimited(_) => "length-delimited field",
        }
    }

    /// The varint of field `field`, or `Unexpected`.
    pub fn varint(self, field: u32) -> Result<u64, WireError> {
        match self {
            WireValue::Varint(value) => Ok(value),
            other => Err(WireError::Unexpected { field, got: other.kind(), want: "varint" }),
        }
    }

    /// The length-delimited bytes of field `field`, or `Unexpected`.
    pub fn length_delimited(self, field: u32) -> Result<Segments, WireError> {
        match self {
            WireValue::LengthDelimited(bytes) => Ok(bytes),
            other => Err(WireError::Unexpected {
                field,
                got: other.kind(),
                want: "length-delimited field",
            }),
        }
    }
}

/// The next field of `message` and its value, consuming them; `None` at the end.
pub fn next_field(message: &mut Segments) -> Result<Option<(u32, WireValue)>, WireError> {
    if message.is_empty() {
        return Ok(None);
    }
    let key = varint(message)?;
    let field = u32::try_from(key >> 3).map_err(|_| WireError::Varint)?;
    if field == 0 {
        return Err(WireError::FieldZero);
    }
    let value = match key & 7 {
        0 => WireValue::Varint(varint(message)?),
        1 => WireValue::Fixed64(u64::from_le_bytes(fixed(message)?)),
        2 => {
            let len = usize::try_from(varint(message)?).map_err(|_| WireError::Truncated)?;
            if len > message.len() {
                return Err(WireError::Truncated);
            }
            WireValue::LengthDelimited(message.split_to(len))
        }
        5 => WireValue::Fixed32(u32::from_le_bytes(fixed(message)?)),
        wire_type => return Err(WireError::WireType { field, wire_type: wire_type as u8 }),
    };
    Ok(Some((field, value)))
}

fn varint(message: &mut Segments) -> Result<u64, WireError> {
    if message.is_empty() {
        return Err(WireError::Truncated);
    }
    // prost reads a varint across pieces; it fails on a varint cut short or over 10 bytes.
    let before = message.len();
    decode_varint(message).map_err(|_| {
        if before < 10 {
            WireError::Truncated
        } else {
            WireError::Varint
        }
    })
}

fn fixed<const N: usize>(message: &mut Segments) -> Result<[u8; N], WireError> {
    if message.len() < N {
        return Err(WireError::Truncated);
    }
    let mut bytes = [0_u8; N];
    for (target, byte) in bytes.iter_mut().zip(message.split_to(N).parts().flatten()) {
        *target = *byte;
    }
    Ok(bytes)
}

/// A small message encoded by prost, as one piece with its gRPC prefix.
pub fn small_message(message: &impl prost::Message) -> Vec<Bytes> {
    let len = message.encoded_len();
    let announced = u32::try_from(len).expect("a small message fits the prefix");
    let mut bytes = BytesMut::with_capacity(GRPC_PREFIX_BYTES + len);
    bytes.put_u8(0);
    bytes.put_u32(announced);
    message.encode(&mut bytes).expect("the buffer was sized for the message");
    vec![bytes.freeze()]
}

/// The encoded length of a varint field.
pub fn varint_field_len(field: u32, value: u64) -> usize {
    key_len(field) + encoded_len_varint(value)
}

/// The encoded length of a length-delimited field holding `len` bytes.
pub fn length_delimited_len(field: u32, len: usize) -> usize {
    key_len(field) + encoded_len_varint(len as u64) + len
}

fn key_len(field: u32) -> usize {
    encoded_len_varint(u64::from(field) << 3)
}

/// Writes one gRPC message (its prefix, then its fields) as `Bytes` pieces: keys, lengths and
/// small fields are gathered in one buffer; a shared `bytes` field is handed on as it is.
#[derive(Debug)]
pub struct MessageWriter {
    head: BytesMut,
    parts: Vec<Bytes>,
    /// The message's announced length and what has been written of it.
    len: usize,
    written: usize,
}

impl MessageWriter {
    /// A message of exactly `len` bytes (the caller computed it with the `*_len` functions);
    /// `len` must fit the prefix's u32.
    pub fn new(len: usize) -> Self {
        let announced = u32::try_from(len).expect("a gRPC message is at most u32::MAX bytes");
        let mut head = BytesMut::with_capacity(256);
        head.put_u8(0);
        head.put_u32(announced);
        Self { head, parts: Vec::new(), len, written: 0 }
    }

    pub fn varint_field(&mut self, field: u32, value: u64) {
        self.key(field, 0);
        self.varint(value);
    }

    /// The key and length of a nested message of `len` bytes; its fields follow.
    pub fn message_header(&mut self, field: u32, len: usize) {
        self.key(field, 2);
        self.varint(len as u64);
    }

    /// A small `bytes` or `string` field, copied.
    pub fn bytes_field(&mut self, field: u32, value: &[u8]) {
        self.message_header(field, value.len());
        self.head.put_slice(value);
        self.written += value.len();
    }

    /// A `bytes` field handed on without a copy; a small one is copied into the gathered
    /// bytes instead (a DATA frame of its own would cost more than the copy).
    pub fn shared_bytes_field(&mut self, field: u32, value: Bytes) {
        if value.len() <= COPIED_FIELD_BYTES_MAX {
            return self.bytes_field(field, &value);
        }
        self.message_header(field, value.len());
        if !self.head.is_empty() {
            self.parts.push(self.head.split().freeze());
        }
        self.written += value.len();
        if !value.is_empty() {
            self.parts.push(value);
        }
    }

    /// The message's pieces, prefix first.
    pub fn finish(mut self) -> Vec<Bytes> {
        assert_eq!(self.written, self.len, "a message is as long as announced");
        if !self.head.is_empty() {
            self.parts.push(self.head.freeze());
        }
        self.parts
    }

    fn key(&mut self, field: u32, wire_type: u64) {
        self.varint((u64::from(field) << 3) | wire_type);
    }

    fn varint(&mut self, value: u64) {
        let before = self.head.len();
        encode_varint(value, &mut self.head);
        self.written += self.head.len() - before;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes fields, cuts the bytes at every point into two pieces, and reads them back.
    #[test]
    fn fields_read_back_however_the_message_is_cut() {
        let payload = Bytes::from(vec![7; COPIED_FIELD_BYTES_MAX + 1]);
        let small = Bytes::from_static(&[9; 5]);
        let len = varint_field_len(1, 300)
            + length_delimited_len(2, 3)
            + length_delimited_len(3, payload.len())
            + length_delimited_len(4, small.len());
        let mut writer = MessageWriter::new(len);
        writer.varint_field(1, 300);
        writer.bytes_field(2, b"abc");
        writer.shared_bytes_field(3, payload.clone());
        writer.shared_bytes_field(4, small.clone());
        let parts = writer.finish();
        assert!(parts.iter().any(|part| part.as_ptr() == payload.as_ptr()), "shared, not copied");
        assert!(parts.iter().all(|part| part.as_ptr() != small.as_ptr()), "small: copied");
        let joined: Vec<u8> = parts.iter().flat_map(|part| part.iter().copied()).collect();
        let mut prefix = [0_u8; GRPC_PREFIX_BYTES];
        prefix[1..].copy_from_slice(&(len as u32).to_be_bytes());
        assert_eq!(joined[..GRPC_PREFIX_BYTES], prefix, "no compression, then the length");
        let body = Bytes::from(joined).slice(GRPC_PREFIX_BYTES..);
        // Every cut among the keys and lengths at either end, and some inside the payload.
        let ends = (0..64).chain(body.len() - 64..body.len());
        for cut in ends.chain((64..body.len() - 64).step_by(997)) {
            let mut message = Segments::from(body.slice(..cut));
            message.push(body.slice(cut..));
            let mut fields = Vec::new();
            while let Some(field) = next_field(&mut message).expect("a valid message") {
                fields.push(field);
            }
            assert_eq!(fields.len(), 4, "cut at {cut}");
            assert_eq!(fields[0], (1, WireValue::Varint(300)));
            let (_, second) = fields.remove(1);
            let second = second.length_delimited(2).expect("bytes");
            assert_eq!(second.into_contiguous(), Bytes::from_static(b"abc"));
        }
    }

    /// Cut-short fields, field 0 and groups are refused by name.
    #[test]
    fn malformed_fields_are_refused() {
        let cases: [(&'static [u8], WireError); 5] = [
            (&[0x08], WireError::Truncated),
            (&[0x12, 0x05, 1, 2], WireError::Truncated),
            (&[0x00, 0x01], WireError::FieldZero),
            (&[0x0b], WireError::WireType { field: 1, wire_type: 3 }),
            (&[0x0d, 1, 2], WireError::Truncated),
        ];
        for (bytes, error) in cases {
            let mut message = Segments::from(Bytes::from_static(bytes));
            assert_eq!(next_field(&mut message), Err(error), "{bytes:?}");
        }
    }
}
