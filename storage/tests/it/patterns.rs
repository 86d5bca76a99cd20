//! Pattern expansion: the order files are read in, and what happens when a pattern names
//! nothing.

use std::path::{Path, PathBuf};

use storage::recordio::{
    expand_pattern_guarded, expand_patterns, ErrorKind, ExpandGuard, FileIndex, RecordIoError,
    Scanner, WriterOptions,
};

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
    let folder = directory.path().display().to_string();
    let error = expand_patterns(std::slice::from_ref(&folder)).expect_err("a directory");
    assert!(
        matches!(&error.kind, ErrorKind::Directory { pattern } if *pattern == folder),
        "{error}"
    );
    assert!(error.to_string().contains("is a directory: name its files"), "{error}");

    let invalid = directory.path().join("[").display().to_string();
    let error = expand_patterns(std::slice::from_ref(&invalid)).expect_err("invalid glob");
    assert!(
        matches!(&error.kind, ErrorKind::BadPattern { pattern, .. } if *pattern == invalid),
        "{error}"
    );
    assert_eq!(error.path, PathBuf::from(&invalid));
}

/// Counts what a guarded expansion shows it, stops it after `entry_count_max` entries and
/// skips the directories named `skipped`.
struct CountingGuard {
    directories: Vec<PathBuf>,
    entry_count: usize,
    entry_count_max: usize,
    skipped: &'static str,
}

impl CountingGuard {
    fn new(entry_count_max: usize, skipped: &'static str) -> Self {
        CountingGuard { directories: Vec::new(), entry_count: 0, entry_count_max, skipped }
    }
}

/// Why a guarded expansion in these tests stopped: the guard said so, or the expansion
/// failed (its error's message).
#[derive(Debug)]
enum Stop {
    Guard(String),
    Expansion(String),
}

impl From<RecordIoError> for Stop {
    fn from(error: RecordIoError) -> Self {
        Stop::Expansion(error.to_string())
    }
}

impl ExpandGuard for CountingGuard {
    type Error = Stop;

    fn visit_directory(&mut self, directory: &Path) -> Result<bool, Stop> {
        self.directories.push(directory.to_owned());
        Ok(directory.file_name().is_none_or(|name| name != self.skipped))
    }

    fn visit_entry(&mut self, entry: &Path) -> Result<(), Stop> {
        self.entry_count += 1;
        if self.entry_count > self.entry_count_max {
            return Err(Stop::Guard(format!("stopped at {}", entry.display())));
        }
        Ok(())
    }
}

/// A `**` glob over a wide tree without loops (levels each linked twice from the one above:
/// 2^30 paths) shows the guard every entry, so the guard can stop it.
#[test]
fn a_guard_stops_a_glob_over_a_wide_tree() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let root = directory.path();
    std::fs::write(root.join("a.rio"), b"").expect("write");
    std::fs::create_dir(root.join("level0")).expect("the top level");
    for level in 0..30 {
        let below = root.join(format!("level{}", level + 1));
        std::fs::create_dir(&below).expect("a level");
        for link in ["a", "b"] {
            let at = root.join(format!("level{level}")).join(link);
            std::os::unix::fs::symlink(&below, at).expect("symlink");
        }
    }
    let mut guard = CountingGuard::new(1000, "");
    let error = expand_pattern_guarded(root, "level0/**/*.rio", &mut guard).expect_err("stopped");
    assert!(matches!(&error, Stop::Guard(reason) if reason.starts_with("stopped at")), "{error:?}");
    assert_eq!(guard.entry_count, 1001);
}

/// A `**` over a symbolic link loop (which `glob::glob` walks for ever: links back to the
/// directory make 2^40 paths before the kernel's link limit) is refused where the loop closes,
/// unguarded too, after a handful of entries; a `**` deeper than `GLOB_DEPTH_MAX` is refused
/// naming the bound.
#[test]
fn a_glob_over_a_loop_or_too_deep_is_refused() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let root = directory.path();
    std::fs::create_dir_all(root.join("data/sub")).expect("directories");
    std::fs::write(root.join("data/sub/x"), b"").expect("write");
    std::os::unix::fs::symlink("..", root.join("data/sub/up")).expect("symlink");
    std::os::unix::fs::symlink(".", root.join("loop")).expect("symlink");
    let check = |pattern: &str, expected: &str, entry_count_max: usize| {
        let mut guard = CountingGuard::new(usize::MAX, "");
        let error = expand_pattern_guarded(root, pattern, &mut guard).expect_err(pattern);
        assert!(matches!(&error, Stop::Expansion(text) if text.contains(expected)), "{error:?}");
        assert!(guard.entry_count <= entry_count_max, "{pattern}: {}", guard.entry_count);
        let everywhere = root.join(pattern).display().to_string();
        let error = expand_patterns(&[everywhere]).expect_err("unguarded");
        assert!(error.to_string().contains(expected), "{error}");
    };
    check("loop/**/x", "a symbolic link loop", 10);
    check("data/**/x", "a symbolic link loop", 10);
    let mut deep = root.join("deep");
    for _ in 0..=storage::recordio::GLOB_DEPTH_MAX {
        deep.push("d");
    }
    std::fs::create_dir_all(&deep).expect("deep directories");
    check("deep/**/x", "deeper than 64 directories (GLOB_DEPTH_MAX)", 70);
}

/// A relative pattern is taken relative to the base, which is literal (its glob characters
/// are not special); a directory the guard skips is not listed, and its files do not match;
/// the expansion's own errors come through the guard's error type.
#[test]
fn a_guard_sees_and_skips_directories() {
    let directory = tempfile::tempdir().expect("temporary directory");
    let base = directory.path().join("data[1]");
    for sub in ["kept", "skipped"] {
        std::fs::create_dir_all(base.join(sub)).expect("directory");
        std::fs::write(base.join(sub).join("a.rio"), b"").expect("write");
    }
    let mut guard = CountingGuard::new(usize::MAX, "skipped");
    let matched = expand_pattern_guarded(&base, "*/*.rio", &mut guard).expect("expand");
    assert_eq!(matched, vec![base.join("kept/a.rio")]);
    assert!(guard.directories.contains(&base.join("skipped")), "{:?}", guard.directories);
    let mut guard = CountingGuard::new(usize::MAX, "");
    let matched = expand_pattern_guarded(&base, "kept/a.rio", &mut guard).expect("literal");
    assert_eq!(matched, vec![base.join("kept/a.rio")]);
    assert_eq!(guard.directories, vec![base.join("kept")], "a literal file's directory is seen");
    let error = expand_pattern_guarded(&base, "kept/[", &mut guard).expect_err("invalid glob");
    assert!(
        matches!(&error, Stop::Expansion(message) if message.contains("invalid glob pattern")),
        "{error:?}"
    );
}

/// Indexing calls its guard with every chunk as its header is read, and stops at once when
/// the guard refuses one: the headers after it are never read.
#[test]
fn a_guard_stops_indexing_at_a_chunk() {
    let options = WriterOptions { max_chunk_bytes: 1, ..WriterOptions::default() };
    let (_directory, path) =
        crate::support::temp_file(&write_records(&records(&["a", "b", "c", "d", "e"]), options));
    let mut offsets = Vec::new();
    let error = FileIndex::build_guarded(&path, |chunk| {
        offsets.push(chunk.offset);
        match offsets.len() {
            2 => Err(RecordIoError::new(
                &path,
                chunk.offset,
                ErrorKind::NoMatch { pattern: "stop".into() },
            )),
            _ => Ok(()),
        }
    })
    .expect_err("stopped");
    assert_eq!(offsets.len(), 2);
    assert_eq!(error.offset, offsets[1]);
    assert_eq!(FileIndex::build(&path).expect("index").chunks().len(), 5);
}
