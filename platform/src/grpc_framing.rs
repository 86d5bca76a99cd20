//! `GrpcFraming`: follows the gRPC length-prefixed messages through a request body's bytes,
//! however they are cut into frames, to find where each message announces its length.

/// The gRPC message prefix: a compression flag and a big-endian u32 length.
const PREFIX_BYTES: usize = 5;

/// Where the reader is in the stream of messages.
#[derive(Debug, Default)]
pub(crate) struct GrpcFraming {
    prefix: [u8; PREFIX_BYTES],
    prefix_len: usize,
    /// Bytes of the current message still to come.
    message_left: u64,
}

impl GrpcFraming {
    /// Reads `data` up to and including the byte that completes the next prefix announcing a
    /// non-empty message: that byte's index and the announced length; `None` when `data` ends
    /// first.
    pub(crate) fn next_announcement(&mut self, data: &[u8]) -> Option<(usize, u32)> {
        let mut at = 0;
        while at < data.len() {
            if self.message_left > 0 {
                let take = self.message_left.min((data.len() - at) as u64);
                self.message_left -= take;
                at += take as usize;
                continue;
            }
            self.prefix[self.prefix_len] = data[at];
            self.prefix_len += 1;
            if self.prefix_len == PREFIX_BYTES {
                self.prefix_len = 0;
                let [_, length @ ..] = self.prefix;
                let length = u32::from_be_bytes(length);
                if length > 0 {
                    self.message_left = u64::from(length);
                    return Some((at, length));
                }
            }
            at += 1;
        }
        None
    }

    /// True between messages (the last one has fully arrived).
    pub(crate) fn between_messages(&self) -> bool {
        self.message_left == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefixes split across frames are found at the byte that completes them; message bytes
    /// and empty messages are skipped.
    #[test]
    fn announcements_are_found_however_the_bytes_are_cut() {
        let mut framing = GrpcFraming::default();
        assert_eq!(framing.next_announcement(&[0, 0, 0]), None);
        assert_eq!(framing.next_announcement(&[0, 3, 9, 9]), Some((1, 3)));
        assert!(!framing.between_messages());
        assert_eq!(framing.next_announcement(&[9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        assert!(framing.between_messages(), "an empty message, then half a prefix");
        assert_eq!(framing.next_announcement(&[0, 2, 1]), Some((1, 2)));
    }
}
