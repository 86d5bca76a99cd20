//! Wire forms: requests and responses round trip, and no input makes decoding panic.

use master::state::{
    decode_request, decode_response, encode_request, encode_response, ClientStamp, Command,
    MasterState, Request, Response, Unappliable, FEATURE_LEVEL, REQUEST_BYTES_MAX,
};
use proptest::prelude::*;

use crate::support::{policy, report};

/// Encodes and decodes `request`, and its apply response, through the wire forms.
fn check(request: Request) {
    let decoded = decode_request(&encode_request(&request)).expect("own encoding decodes");
    assert_eq!(decoded, request);
    let response = MasterState::new().apply(&request);
    let bytes = encode_response(&response);
    assert_eq!(decode_response(&bytes).expect("own encoding decodes"), response);
}

/// Every command survives the wire form unchanged.
#[test]
fn requests_round_trip() {
    let client = Some(ClientStamp { client_id: u64::MAX, seq: 3 });
    let commands = [
        report(3, 2, policy()),
        Command::GetTask { trainer: 1, pass: 0 },
        Command::TaskFailed { task_id: 1, epoch: 2, reason: "é".to_string() },
        Command::ExpireTasks,
        Command::RecordEval { pass: 1, loss: 0.5, accuracy: 1.0 },
        Command::ReportIndexDataset {
            job: "job".to_string(),
            size: u64::MAX,
            shard_size: 1 << 50,
            passes: 2,
            policy: policy(),
        },
    ];
    for command in commands {
        check(Request { client, now_ms: 12, term: None, command: command.clone() });
        check(Request { client: None, now_ms: u64::MAX, term: Some(3), command });
    }
}

/// Oversized input is refused before parsing; an undecodable entry is an error of
/// `apply_encoded` (the replica stops: a newer build wrote it) that leaves the state untouched.
#[test]
fn bad_bytes_are_refused() {
    let oversized = vec![0u8; usize::try_from(REQUEST_BYTES_MAX).expect("fits") + 1];
    assert!(decode_request(&oversized).is_err());
    let mut state = MasterState::new();
    let before = state.clone();
    let refused = state.apply_encoded(&[9, 9, 9], 1, FEATURE_LEVEL);
    assert!(matches!(refused, Err(Unappliable::Undecodable { .. })), "{refused:?}");
    assert!(refused.expect_err("refused").to_string().contains("upgrade this master"));
    assert_eq!(state, before);
    let request = Request { client: None, now_ms: 1, term: None, command: report(1, 1, policy()) };
    let answer = state.apply_encoded(&encode_request(&request), 1, FEATURE_LEVEL);
    let answer = answer.expect("a level-1 command applies");
    assert!(matches!(decode_response(&answer), Ok(Response::DatasetAccepted { .. })));
    assert!(MasterState::decode(&[1, 2, 3]).is_err());
}

proptest! {
    /// Random bytes never make request, response or snapshot decoding panic.
    #[test]
    fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_request(&bytes);
        let _ = decode_response(&bytes);
        let _ = MasterState::decode(&bytes);
    }

    /// A valid encoding with one byte changed still never panics (deeper than random bytes go).
    #[test]
    fn decoding_mutated_requests_never_panics(position in any::<usize>(), byte in any::<u8>()) {
        let request = Request { client: None, now_ms: 5, term: None, command: report(3, 2, policy()) };
        let mut bytes = encode_request(&request);
        let index = position % bytes.len();
        bytes[index] = byte;
        let _ = decode_request(&bytes);
    }
}
