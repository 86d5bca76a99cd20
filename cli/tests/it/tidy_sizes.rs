//! Tidy checks of the house limits (STYLE.md), enforced as ordinary tests: no Rust source file
//! of the workspace passes `FILE_LINE_COUNT_MAX` lines, and no function outside the tests
//! passes `FUNCTION_LINE_COUNT_MAX` (tests may read as one long story).

use std::path::{Path, PathBuf};

const FILE_LINE_COUNT_MAX: usize = 500;
const FUNCTION_LINE_COUNT_MAX: usize = 70;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli sits in the workspace").to_owned()
}

/// Every `.rs` file under `directory`, `target/`, `third_party/` (code carried, not written
/// here) and hidden folders left out.
fn rust_sources(directory: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(directory).into_iter().flatten().flatten() {
        let (path, name) = (entry.path(), entry.file_name());
        let hidden = name.to_string_lossy().starts_with('.');
        if path.is_dir() && name != "target" && name != "third_party" && !hidden {
            rust_sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

fn sources() -> Vec<(String, String)> {
    let root = workspace();
    let mut paths = Vec::new();
    rust_sources(&root, &mut paths);
    assert!(paths.len() > 100, "found the sources");
    let read = |path: &PathBuf| std::fs::read_to_string(path).expect("a source is readable");
    let relative = |path: &PathBuf| path.strip_prefix(&root).unwrap_or(path).display().to_string();
    paths.iter().map(|path| (relative(path), read(path))).collect()
}

/// Where a function starts: `fn` opening a line (after `pub(...)`, `async`, `const`).
fn function_name(line: &str) -> Option<&str> {
    let mut words = line.split_whitespace().skip_while(|word| {
        word.starts_with("pub") || matches!(*word, "async" | "const" | "unsafe" | "extern")
    });
    let rest = words.next().filter(|word| *word == "fn").and(words.next())?;
    Some(rest.split(['(', '<']).next().unwrap_or(rest))
}

/// The length of each function in `lines` that starts before `end` (brace counting: a
/// signature ending in `;` declares, it does not define).
fn function_lengths<'a>(lines: &[&'a str], end: usize) -> Vec<(&'a str, usize, usize)> {
    let mut found = Vec::new();
    let mut index = 0;
    while index < end {
        let Some(name) = function_name(lines[index]).filter(|_| !lines[index].ends_with(';'))
        else {
            index += 1;
            continue;
        };
        let (mut depth, mut opened, mut last) = (0i64, false, index);
        for (offset, line) in lines[index..].iter().enumerate() {
            depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            opened |= line.contains('{');
            last = index + offset;
            if opened && depth <= 0 {
                break;
            }
        }
        found.push((name, index + 1, last - index + 1));
        index = last + 1;
    }
    found
}

#[test]
fn every_source_file_stays_within_the_line_limit() {
    let long: Vec<String> = sources()
        .into_iter()
        .filter(|(_, text)| text.lines().count() > FILE_LINE_COUNT_MAX)
        .map(|(path, text)| format!("{path}: {} lines", text.lines().count()))
        .collect();
    assert!(long.is_empty(), "over {FILE_LINE_COUNT_MAX} lines (split by area): {long:?}");
}

#[test]
fn every_function_outside_the_tests_stays_within_the_line_limit() {
    let mut long = Vec::new();
    for (path, text) in sources() {
        if path.contains("/tests/") || path.ends_with("tests.rs") {
            continue;
        }
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let tests_from = lines.iter().position(|line| *line == "#[cfg(test)]");
        let end = tests_from.unwrap_or(lines.len());
        for (name, line, count) in function_lengths(&lines, end) {
            if count > FUNCTION_LINE_COUNT_MAX {
                long.push(format!("{path}:{line}: fn {name}: {count} lines"));
            }
        }
    }
    assert!(long.is_empty(), "over {FUNCTION_LINE_COUNT_MAX} lines: {long:#?}");
}

/// The function finder finds what a reader would call a function, and only that.
#[test]
fn the_function_finder_measures_functions() {
    let code =
        ["pub(crate) async fn a(x: u8) {", "    if x {", "    }", "}", "fn b();", "fn c<T>() {}"];
    let found = function_lengths(&code, code.len());
    assert_eq!(found, vec![("a", 1, 4), ("c", 6, 1)]);
}
