//! `SlotSecret`: 128 bits that only a pserver slot's claimer knows, so that what anyone can
//! read in `ListPServers` (slot, address, generation) is not enough to act as the holder.

use serde::{Deserialize, Serialize};

/// The secret a claim carried. The claimer draws it from the OS and sends it in the claim, so
/// every replica applies the same value; the state keeps it with the holder and never shows
/// it (not in `ListPServers`, not in status, not in `Debug`).
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
pub struct SlotSecret(u128);

/// How many bytes a secret is on the wire.
pub const SLOT_SECRET_BYTES: usize = 16;

impl SlotSecret {
    /// A secret from its wire form (16 bytes, little endian); `None` for any other length
    /// (an empty field is an older client that sends none).
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let bytes: [u8; SLOT_SECRET_BYTES] = bytes.try_into().ok()?;
        Some(Self(u128::from_le_bytes(bytes)))
    }

    /// The wire form.
    pub fn to_bytes(self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }

    /// A secret made of these bits: the pserver passes 128 bits from the OS, the simulation
    /// bits from its seed.
    pub fn from_bits(bits: u128) -> Self {
        Self(bits)
    }

    /// Compares without stopping at the first differing byte, so the time an answer takes
    /// says nothing about how much of a guess was right.
    pub fn matches(self, other: SlotSecret) -> bool {
        (self.0 ^ other.0).count_ones() == 0
    }
}

impl std::fmt::Debug for SlotSecret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("SlotSecret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only 16 bytes make a secret, it round-trips, and `Debug` never prints it.
    #[test]
    fn secrets_have_one_wire_form_and_never_print() {
        let secret = SlotSecret::from_bits(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        assert_eq!(SlotSecret::from_bytes(&secret.to_bytes()), Some(secret));
        assert_eq!(SlotSecret::from_bytes(&[]), None);
        assert_eq!(SlotSecret::from_bytes(&[1; 15]), None);
        assert_eq!(SlotSecret::from_bytes(&[1; 17]), None);
        assert!(secret.matches(secret));
        assert!(!secret.matches(SlotSecret::from_bits(1)));
        assert_eq!(format!("{secret:?}"), "SlotSecret(..)");
    }
}
