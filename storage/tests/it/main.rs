//! Integration tests of the RecordIO format: round trips, golden bytes, every error kind,
//! index I/O, robustness against arbitrary bytes, and pattern expansion.

mod corruption;
mod golden;
mod index_reads;
mod no_panic;
mod patterns;
mod round_trip;
mod support;
