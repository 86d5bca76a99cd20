//! Tidy checks: the state machine's Architecture Invariants, enforced as ordinary tests.

use std::path::Path;

/// Words whose presence in code (not comments) would break determinism or purity.
const FORBIDDEN: [&str; 10] = [
    "HashMap",
    "HashSet",
    "tokio",
    "tonic",
    "openraft",
    "sled",
    "SystemTime",
    "Instant",
    "rand::",
    "std::fs",
];

/// The longest a source file of the state machine may grow.
const FILE_LINE_COUNT_MAX: usize = 500;

/// Reads every source file of `master::state` as (name, text).
fn state_sources() -> Vec<(String, String)> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/state");
    let mut sources: Vec<(String, String)> = std::fs::read_dir(&directory)
        .expect("src/state is readable")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "rs"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("source file is readable");
            (path.display().to_string(), text)
        })
        .collect();
    sources.sort();
    sources
}

/// The state machine reads no clock, draws no randomness, does no I/O, iterates no hash map
/// and knows nothing of the async or consensus crates; every file says what it is for first
/// and stays short.
#[test]
fn state_machine_stays_pure() {
    let sources = state_sources();
    assert!(sources.len() > 10, "found the state sources");
    for (name, text) in sources {
        assert!(text.starts_with("//!"), "{name}: must open with a //! line");
        let line_count = text.lines().count();
        assert!(line_count <= FILE_LINE_COUNT_MAX, "{name}: {line_count} lines");
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for word in FORBIDDEN {
                assert!(!line.contains(word), "{name}:{}: uses {word}", number + 1);
            }
        }
    }
}
