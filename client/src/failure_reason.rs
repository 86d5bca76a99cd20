//! A task failure's reason as it travels: cut by the client to what the master keeps, so a
//! huge reason (a Python exception with megabytes of text) still fails the task instead of
//! being refused as too large, and the cut is marked.

/// The most bytes of one failure reason the master keeps (longer ones are cut). The master's
/// state and every client use this one value.
pub const FAILURE_REASON_BYTES_MAX: usize = 1024;

/// What ends a reason that was cut.
const CUT_MARKER: &str = " [cut]";

/// `reason` if it fits [`FAILURE_REASON_BYTES_MAX`]; otherwise its start, cut on a UTF-8
/// boundary, followed by a marker, within the bound.
pub fn cut_reason(reason: &str) -> std::borrow::Cow<'_, str> {
    if reason.len() <= FAILURE_REASON_BYTES_MAX {
        return reason.into();
    }
    let mut end = FAILURE_REASON_BYTES_MAX - CUT_MARKER.len();
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{CUT_MARKER}", &reason[..end]).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cuts `reason` and compares with `expected_bytes` and whether it ends in the marker.
    fn check(reason: &str, expected_bytes: usize, marked: bool) {
        let cut = cut_reason(reason);
        assert_eq!((cut.len(), cut.ends_with(CUT_MARKER)), (expected_bytes, marked), "{reason:?}");
        assert!(reason.starts_with(cut.trim_end_matches(CUT_MARKER)));
    }

    /// A reason within the bound travels whole; a longer one is cut to the bound, never
    /// inside a character, and marked.
    #[test]
    fn long_reasons_are_cut_on_a_character_boundary() {
        let bound = FAILURE_REASON_BYTES_MAX;
        check("", 0, false);
        check(&"a".repeat(bound), bound, false);
        check(&"a".repeat(bound + 1), bound, true);
        check(&"a".repeat(4 << 20), bound, true);
        // 'é' is two bytes: the cut falls inside one and moves back a byte.
        check(&format!("a{}", "é".repeat(bound)), bound - 1, true);
    }
}
