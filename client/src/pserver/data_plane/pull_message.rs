//! `PullParamsReply` on the wire: written from each block's copy taken under its lock (handed
//! on, not copied again), read with each block's values left in the frames they arrived in.

use bytes::Bytes;
use platform::unary::{
    length_delimited_len, next_field, varint_field_len, MessageWriter, Segments,
};
use proto::pserver as pb;
use tonic::Status;

use super::malformed;
use super::push_message::{block_len, decode_block, write_block};
use crate::pserver::placement::BlockId;

/// What a pull's reply says of the shard besides its blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PullStamp {
    /// Gradients the shard has applied in all.
    pub step: u64,
    /// The job's model restore the shard's values come from.
    pub model_restore: u64,
}

/// A pull's reply as the client reads it.
#[derive(Debug)]
pub struct PullReply {
    pub blocks: Vec<(BlockId, Segments)>,
    pub step: u64,
    /// The job's model restore the blocks' shard is of.
    pub model_restore: u64,
}

/// The reply's pieces: each block's values handed on as they are.
pub fn encode(blocks: Vec<(BlockId, Bytes)>, stamp: PullStamp) -> Vec<Bytes> {
    let blocks: Vec<pb::Block> = blocks
        .into_iter()
        .map(|(id, values)| pb::Block { name: id.name, index: id.index, values })
        .collect();
    let PullStamp { step, model_restore } = stamp;
    let varint_len = |field, value| if value == 0 { 0 } else { varint_field_len(field, value) };
    let message_len = varint_len(2, step)
        + varint_len(3, model_restore)
        + blocks.iter().map(|block| length_delimited_len(1, block_len(block))).sum::<usize>();
    let mut writer = MessageWriter::new(message_len);
    for block in &blocks {
        writer.message_header(1, block_len(block));
        write_block(&mut writer, block);
    }
    for (field, value) in [(2, step), (3, model_restore)] {
        if value != 0 {
            writer.varint_field(field, value);
        }
    }
    writer.finish()
}

/// Reads a reply; `INTERNAL` when the server sent something that is not a `PullParamsReply`.
pub fn decode(mut message: Segments) -> Result<PullReply, Status> {
    let what = "the PullParams reply";
    let refuse = |error: &dyn std::fmt::Display| Status::internal(malformed(what, error).message());
    let (mut blocks, mut step, mut model_restore) = (Vec::new(), 0, 0);
    while let Some((field, value)) = next_field(&mut message).map_err(|e| refuse(&e))? {
        match field {
            1 => {
                let bytes = value.length_delimited(1).map_err(|e| refuse(&e))?;
                blocks.push(decode_block(bytes).map_err(|e| refuse(&e))?);
            }
            2 => step = value.varint(2).map_err(|e| refuse(&e))?,
            3 => model_restore = value.varint(3).map_err(|e| refuse(&e))?,
            _ => {}
        }
    }
    Ok(PullReply { blocks, step, model_restore })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::Message as _;

    /// What `encode` writes is the message prost writes, and `decode` reads it back.
    #[test]
    fn the_wire_form_is_protobufs() {
        let values = Bytes::from_static(&[0, 0, 0x80, 0x3f]);
        let stamp = PullStamp { step: 7, model_restore: 300 };
        let ours = encode(vec![(BlockId { name: "w".into(), index: 2 }, values.clone())], stamp);
        let generated = pb::PullParamsReply {
            blocks: vec![pb::Block { name: "w".into(), index: 2, values: values.clone() }],
            step: 7,
            model_restore: 300,
        };
        let joined: Vec<u8> = ours.iter().flat_map(|piece| piece.iter().copied()).collect();
        assert_eq!(joined[5..], generated.encode_to_vec(), "byte for byte");
        let read = decode(Segments::from(Bytes::from(generated.encode_to_vec()))).expect("valid");
        assert_eq!((read.step, read.model_restore), (7, 300));
        assert_eq!(read.blocks.len(), 1);
        assert_eq!(read.blocks[0].0, BlockId { name: "w".into(), index: 2 });
        assert_eq!(read.blocks[0].1.clone().into_contiguous(), values);
    }
}
