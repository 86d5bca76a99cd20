//! `PushGradsRequest` and `PushPullRequest` on the wire (the second is the first with the
//! pull's block ids as field 3): written with each block's payload handed on as the caller's
//! `Bytes`, read with each payload left in the frames it arrived in.

use bytes::Bytes;
use platform::unary::{
    length_delimited_len, next_field, varint_field_len, MessageWriter, Segments, WireError,
};
use proto::pserver as pb;
use proto::Message as _;
use tonic::Status;

use super::malformed;
use crate::pserver::placement::BlockId;

/// A push as the server reads it.
#[derive(Debug)]
pub struct PushRequest {
    pub fence: Option<pb::Fence>,
    pub blocks: Vec<(BlockId, Segments)>,
    /// A `PushPullRequest`'s pull (empty for a `PushGradsRequest`).
    pub pull: Vec<pb::BlockId>,
}

/// The message's pieces (`platform::unary::call` sends them): `blocks`' values are not copied.
/// With `pull`, a `PushPullRequest`.
pub fn encode(fence: pb::Fence, blocks: &[pb::Block], pull: &[pb::BlockId]) -> Vec<Bytes> {
    let fence = fence.encode_to_vec();
    let pull: Vec<Vec<u8>> = pull.iter().map(|id| id.encode_to_vec()).collect();
    let message_len = length_delimited_len(1, fence.len())
        + blocks.iter().map(|block| length_delimited_len(2, block_len(block))).sum::<usize>()
        + pull.iter().map(|id| length_delimited_len(3, id.len())).sum::<usize>();
    let mut writer = MessageWriter::new(message_len);
    writer.bytes_field(1, &fence);
    for block in blocks {
        writer.message_header(2, block_len(block));
        write_block(&mut writer, block);
    }
    for id in &pull {
        writer.bytes_field(3, id);
    }
    writer.finish()
}

/// One `Block`'s fields, proto3 defaults left out as prost leaves them.
pub(super) fn write_block(writer: &mut MessageWriter, block: &pb::Block) {
    if !block.name.is_empty() {
        writer.bytes_field(1, block.name.as_bytes());
    }
    if block.index != 0 {
        writer.varint_field(2, u64::from(block.index));
    }
    if !block.values.is_empty() {
        writer.shared_bytes_field(3, block.values.clone());
    }
}

/// The encoded length of one `Block`.
pub(super) fn block_len(block: &pb::Block) -> usize {
    let name = if block.name.is_empty() { 0 } else { length_delimited_len(1, block.name.len()) };
    let index = if block.index == 0 { 0 } else { varint_field_len(2, u64::from(block.index)) };
    let values =
        if block.values.is_empty() { 0 } else { length_delimited_len(3, block.values.len()) };
    name + index + values
}

/// Reads a push (a `PushPullRequest` if `with_pull`, a `PushGradsRequest` otherwise, whose
/// field 3 is unknown and skipped); `INVALID_ARGUMENT` naming what is wrong.
pub fn decode(mut message: Segments, with_pull: bool) -> Result<PushRequest, Status> {
    let what = if with_pull { "the PushPull request" } else { "the PushGrads request" };
    let mut fence: Option<pb::Fence> = None;
    let (mut blocks, mut pull) = (Vec::new(), Vec::new());
    while let Some((field, value)) = next_field(&mut message).map_err(|e| malformed(what, e))? {
        match field {
            1 => {
                let bytes = value.length_delimited(1).map_err(|e| malformed(what, e))?;
                // Repeated occurrences merge, as protobuf says and prost does.
                let merged = fence.get_or_insert_with(pb::Fence::default);
                merged.merge(bytes).map_err(|error| malformed(what, error))?;
            }
            2 => {
                let bytes = value.length_delimited(2).map_err(|e| malformed(what, e))?;
                blocks.push(decode_block(bytes).map_err(|e| malformed(what, e))?);
            }
            3 if with_pull => {
                let bytes = value.length_delimited(3).map_err(|e| malformed(what, e))?;
                pull.push(pb::BlockId::decode(bytes).map_err(|error| malformed(what, error))?);
            }
            _ => {}
        }
    }
    Ok(PushRequest { fence, blocks, pull })
}

/// A `Block`'s id and its values, left where they are.
pub(super) fn decode_block(mut block: Segments) -> Result<(BlockId, Segments), BlockError> {
    let (mut name, mut index, mut values) = (String::new(), 0, Segments::default());
    while let Some((field, value)) = next_field(&mut block)? {
        match field {
            1 => {
                let bytes = value.length_delimited(1)?.into_contiguous();
                name = String::from_utf8(bytes.to_vec()).map_err(|_| BlockError::Name)?;
            }
            // prost reads a uint32 as a varint cut to 32 bits.
            2 => index = value.varint(2)? as u32,
            3 => values = value.length_delimited(3)?,
            _ => {}
        }
    }
    Ok((BlockId { name, index }, values))
}

/// Why a `Block` could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum BlockError {
    #[error("a block: {0}")]
    Wire(#[from] WireError),
    #[error("a block's name is not UTF-8")]
    Name,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `encode` writes is the message prost writes, and `decode` reads what prost writes.
    #[test]
    fn the_wire_form_is_protobufs() {
        let fence = pb::Fence { slot: 3, generation: 9, model_restore: Some(4) };
        let blocks = vec![
            pb::Block { name: "w".into(), index: 0, values: Bytes::from_static(&[1, 2, 3, 4]) },
            pb::Block { name: "b".into(), index: 300, values: Bytes::new() },
        ];
        let pull = vec![pb::BlockId { name: "w".into(), index: 1 }];
        let generated =
            pb::PushPullRequest { fence: Some(fence), blocks: blocks.clone(), pull: pull.clone() };
        let pieces = encode(fence, &blocks, &pull);
        let ours: Vec<u8> = pieces.iter().flat_map(|piece| piece.iter().copied()).collect();
        assert_eq!(ours[5..], generated.encode_to_vec(), "byte for byte");
        let push_only = encode(fence, &blocks, &[]);
        let push_only: Vec<u8> = push_only.iter().flat_map(|piece| piece.iter().copied()).collect();
        let generated_push = pb::PushGradsRequest { fence: Some(fence), blocks: blocks.clone() };
        assert_eq!(push_only[5..], generated_push.encode_to_vec(), "a PushGradsRequest");
        let bytes = Segments::from(Bytes::from(generated.encode_to_vec()));
        let read = decode(bytes.clone(), true).expect("valid");
        assert_eq!((read.fence, read.pull), (Some(fence), pull));
        assert!(decode(bytes, false).expect("valid").pull.is_empty(), "field 3 is unknown");
        let read: Vec<_> =
            read.blocks.into_iter().map(|(id, values)| (id, values.into_contiguous())).collect();
        let expected: Vec<_> = blocks
            .into_iter()
            .map(|block| (BlockId { name: block.name, index: block.index }, block.values))
            .collect();
        assert_eq!(read, expected);
    }

    /// A message that is not a push is refused, naming why.
    #[test]
    fn malformed_pushes_are_refused() {
        let cases: [(&'static [u8], &str); 3] = [
            (&[0x12, 0x03, 0x0a, 0x01, 0xff], "not UTF-8"),
            (&[0x12, 0x09, 0x0a], "ends inside a field"),
            (&[0x0a, 0x02, 0x08], "the PushGrads request"),
        ];
        for (bytes, text) in cases {
            let message = Segments::from(Bytes::from_static(bytes));
            let status = decode(message, false).expect_err("refused");
            assert_eq!(status.code(), tonic::Code::InvalidArgument);
            assert!(status.message().contains(text), "{bytes:?}: {}", status.message());
        }
    }
}
