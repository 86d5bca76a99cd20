//! Pattern expansion: the order files are read in, and what happens when a pattern names
//! nothing.

use std::path::PathBuf;

use storage::recordio::{expand_patterns, ErrorKind, Scanner, WriterOptions};

use crate::support::{records, write_records};

/// Globs expand in sorted order, patterns keep the order given, directories and non-matching
/// files are skipped, and an existing file is taken literally even with glob characters.
#[test]
fn expansion_order() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let root = directory.path();
    for (name, record) in [("b.rio", "b"), ("a.rio", "a"), ("c.rio", "c"), ("x[1].rio", "x")] {
        let bytes = write_records(&records(&[record]), WriterOptions::default());
        std::fs::write(root.join(name), bytes).expect("write");
    }
    std::fs::create_dir(root.join("d.rio")).expect("directory");
    std::fs::write(root.join("notes.txt"), b"not a recordio file").expect("write");
    let pattern = |suffix: &str| root.join(suffix).display().to_string();
    let patterns = [pattern("c.rio"), pattern("[abc].rio"), pattern("x[1].rio")];
    let expected: Vec<PathBuf> = ["c.rio", "a.rio", "b.rio", "c.rio", "x[1].rio"]
        .iter()
        .map(|name| root.join(name))
        .collect();
    assert_eq!(expand_patterns(&patterns).expect("expand"), expected);

    let scanned: Vec<Vec<u8>> =
        Scanner::open(&patterns).expect("open").map(|record| record.expect("read")).collect();
    assert_eq!(scanned, records(&["c", "a", "b", "c", "x"]));
}

/// A pattern that matches no file, or is not a valid glob, is an error naming the pattern,
/// reported before any file is read.
#[test]
fn unmatched_and_invalid_patterns() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let existing = directory.path().join("a.rio");
    std::fs::write(&existing, write_records(&records(&["a"]), WriterOptions::default()))
        .expect("write");
    let missing = directory.path().join("*.missing").display().to_string();
    let patterns = [existing.display().to_string(), missing.clone()];
    let error = expand_patterns(&patterns).expect_err("no match");
    assert!(
        matches!(&error.kind, ErrorKind::NoMatch { pattern } if *pattern == missing),
        "{error}"
    );
    assert_eq!(error.path, PathBuf::from(&missing));
    assert!(error.to_string().contains("no file matches"), "{error}");
    let error = Scanner::open(&patterns).expect_err("scanner refuses too");
    assert!(matches!(error.kind, ErrorKind::NoMatch { .. }), "{error}");

    let invalid = directory.path().join("[").display().to_string();
    let error = expand_patterns(std::slice::from_ref(&invalid)).expect_err("invalid glob");
    assert!(
        matches!(&error.kind, ErrorKind::BadPattern { pattern, .. } if *pattern == invalid),
        "{error}"
    );
    assert_eq!(error.path, PathBuf::from(&invalid));
}
