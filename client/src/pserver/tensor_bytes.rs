//! Little-endian views of a trainer's own tensors as `Bytes`: a push hands each block of the
//! gradient to h2 where it lies, with no copy, on a little-endian machine (every machine
//! raftrain is built for; a big-endian build encodes a copy instead).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

/// Tensors by name, flat row-major (a trainer's parameters or gradient).
pub type Tensors = BTreeMap<String, Vec<f32>>;

/// `tensors[name][range]` as little-endian bytes, sharing `tensors`. The name must be one of
/// the tensors and the range inside it.
pub fn shared_bytes(tensors: &Arc<Tensors>, name: &str, range: Range<usize>) -> Bytes {
    #[cfg(target_endian = "little")]
    {
        let tensors = tensors.clone();
        Bytes::from_owner(TensorSlice { tensors, name: name.to_string(), range })
    }
    #[cfg(not(target_endian = "little"))]
    {
        Bytes::from(crate::pserver::f32_bytes::encode(&tensors[name][range]))
    }
}

/// The owner of one view: the shared tensors keep the memory alive and unchanged.
#[cfg(target_endian = "little")]
struct TensorSlice {
    tensors: Arc<Tensors>,
    name: String,
    range: Range<usize>,
}

#[cfg(target_endian = "little")]
impl AsRef<[u8]> for TensorSlice {
    fn as_ref(&self) -> &[u8] {
        use zerocopy::IntoBytes as _;
        let values = self.tensors.get(&self.name).expect("the view names one of the tensors");
        values[self.range.clone()].as_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pserver::f32_bytes;

    /// A view is the little-endian encoding of its range, without a copy of the tensor.
    #[test]
    fn a_view_is_the_encoding_of_its_range() {
        let values: Vec<f32> = (0..10).map(|i| i as f32 - 2.5).collect();
        let tensors = Arc::new(Tensors::from([("w".to_string(), values.clone())]));
        let view = shared_bytes(&tensors, "w", 3..7);
        assert_eq!(view.as_ref(), f32_bytes::encode(&values[3..7]));
        #[cfg(target_endian = "little")]
        assert_eq!(view.as_ptr(), tensors["w"][3..].as_ptr().cast::<u8>(), "shared, not copied");
    }
}
