//! `raftrain recordio synth`: the same seed gives the same bytes, another seed other bytes; the
//! truth file holds the answer; the examples decode; bad flags are refused naming the flag.

use crate::command::{raftrain, raftrain_ok};

fn synth(dir: &std::path::Path, kind: &str, seed: &str) {
    let out = dir.display().to_string();
    raftrain_ok(
        &[
            "recordio",
            "synth",
            "--kind",
            kind,
            "--examples",
            "400",
            "--features",
            "4",
            "--seed",
            seed,
            "--out",
            &out,
        ],
        b"",
    );
}

#[test]
fn synth_is_deterministic_by_seed_and_says_its_answer() {
    let temp = tempfile::tempdir().expect("temp");
    let (first, second, other) =
        (temp.path().join("a"), temp.path().join("b"), temp.path().join("c"));
    synth(&first, "blobs", "7");
    synth(&second, "blobs", "7");
    synth(&other, "blobs", "8");
    let read = |dir: &std::path::Path, file: &str| std::fs::read(dir.join(file)).expect("read");
    assert_eq!(read(&first, "train.recordio"), read(&second, "train.recordio"));
    assert_eq!(read(&first, "eval.recordio"), read(&second, "eval.recordio"));
    assert_ne!(read(&first, "train.recordio"), read(&other, "train.recordio"));
    let stat =
        raftrain_ok(&["recordio", "stat", &first.join("eval.recordio").display().to_string()], b"");
    assert!(stat.contains(" 100 "), "a quarter of the examples for evaluation: {stat}");
    let truth: serde_json::Value =
        serde_json::from_slice(&read(&first, "truth.json")).expect("json");
    assert_eq!(truth["centers"].as_array().map(Vec::len), Some(3));

    let linear = temp.path().join("linear");
    synth(&linear, "linear", "1");
    let truth: serde_json::Value =
        serde_json::from_slice(&read(&linear, "truth.json")).expect("json");
    assert_eq!(truth["weights"].as_array().map(Vec::len), Some(4));
    let first_record = raftrain_ok(
        &["recordio", "cat", "--example", &linear.join("train.recordio").display().to_string()],
        b"",
    );
    let example: serde_json::Value =
        serde_json::from_str(first_record.lines().next().expect("a record")).expect("json");
    assert_eq!(example["dense"].as_array().map(Vec::len), Some(4));
}

#[test]
fn synth_refuses_bad_flags_by_name() {
    let temp = tempfile::tempdir().expect("temp");
    let out = temp.path().display().to_string();
    for (flag, value) in
        [("--examples", "0"), ("--classes", "1"), ("--features", "0"), ("--noise", "NaN")]
    {
        let output = raftrain(&["recordio", "synth", flag, value, "--out", &out], b"");
        assert!(!output.success && output.stderr.contains(flag), "{flag}: {}", output.stderr);
    }
}
