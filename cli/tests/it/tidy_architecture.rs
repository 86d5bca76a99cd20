//! Tidy checks that keep ARCHITECTURE.md true, enforced as ordinary tests: every Architecture
//! Invariant names what enforces it (`Enforced by:` and at least one `path` or `path::test`,
//! each path a file of the workspace and each name a function in it), every path the document
//! names exists, and no test asserts an upper bound on a wall-clock duration (benchmarks are
//! programs, not tests).

use std::path::{Path, PathBuf};

const INVARIANTS_HEADING: &str = "## Architecture Invariants";
const ENFORCED_BY: &str = "Enforced by:";
/// Extensions of the tokens read as paths (a token with a `/` and one of these, or ending in
/// `/`).
const PATH_EXTENSIONS: [&str; 8] = [".rs", ".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".proto"];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("cli sits in the workspace").to_owned()
}

fn architecture() -> String {
    std::fs::read_to_string(workspace().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

/// The invariant bullets (each `- **...` and its continuation lines, joined).
fn invariants(document: &str) -> Vec<String> {
    let section = document.split(INVARIANTS_HEADING).nth(1).expect("the invariants section");
    let section = section.split("\n## ").next().unwrap_or_default();
    let mut bullets: Vec<String> = Vec::new();
    for line in section.lines() {
        if line.starts_with("- **") {
            bullets.push(line.to_string());
        } else if let Some(bullet) = bullets.last_mut().filter(|_| line.starts_with("  ")) {
            bullet.push(' ');
            bullet.push_str(line.trim());
        }
    }
    bullets
}

/// The text between backticks, in order.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// Where a path the document names lies: from the workspace root, or inside a crate (a
/// section about a crate names its files from the crate or its `src/`).
fn resolve(path: &str) -> Option<PathBuf> {
    let root = workspace();
    let mut bases = vec![root.clone()];
    for entry in std::fs::read_dir(&root).expect("the workspace is readable").flatten() {
        if entry.path().join("Cargo.toml").exists() || entry.file_name() == "python" {
            bases.push(entry.path().join("src"));
            bases.push(entry.path());
        }
    }
    bases.into_iter().map(|base| base.join(path)).find(|candidate| candidate.exists())
}

/// A code span that names a file or folder of the repository: not a URL, a placeholder, an
/// absolute path, a path outside the repository (`../shared/`) or build output (`target/`).
fn looks_like_a_path(token: &str) -> bool {
    let outside = ["/", "../", "target/"].iter().any(|prefix| token.starts_with(prefix));
    let plain = !token.contains("://") && !token.contains('<') && !outside;
    let named = token.ends_with('/') || PATH_EXTENSIONS.iter().any(|ext| token.ends_with(ext));
    plain && token.contains('/') && named && !token.contains(' ')
}

/// What is wrong with one enforcer (`path` or `path::function`), if anything.
fn check_enforcer(token: &str) -> Option<String> {
    let (path, function) = match token.split_once("::") {
        Some((path, function)) => (path, Some(function)),
        None => (token, None),
    };
    let Some(file) = resolve(path).filter(|_| path.contains('/')) else {
        return Some(format!("`{token}`: no such file"));
    };
    let function = function?;
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let defined =
        text.contains(&format!("fn {function}(")) || text.contains(&format!("fn {function}<"));
    (!defined).then(|| format!("`{token}`: {} defines no fn {function}", file.display()))
}

/// Every invariant says what enforces it, and each enforcer it names exists.
#[test]
fn every_invariant_names_an_enforcer_that_exists() {
    let document = architecture();
    let bullets = invariants(&document);
    assert!(bullets.len() >= 30, "found the invariants: {}", bullets.len());
    let mut problems = Vec::new();
    for bullet in &bullets {
        let title: String = bullet.chars().take(70).collect();
        let Some((_, enforcers)) = bullet.split_once(ENFORCED_BY) else {
            problems.push(format!("{title}: says no `{ENFORCED_BY}`"));
            continue;
        };
        let tokens = code_spans(enforcers);
        if tokens.is_empty() {
            problems.push(format!("{title}: names no enforcer"));
        }
        problems
            .extend(tokens.into_iter().filter_map(check_enforcer).map(|p| format!("{title}: {p}")));
    }
    assert!(problems.is_empty(), "ARCHITECTURE.md invariants:\n{}", problems.join("\n"));
}

/// Every file or folder the document names (as a code span with a `/`) exists.
#[test]
fn every_path_the_architecture_names_exists() {
    let document = architecture();
    let missing: Vec<&str> = code_spans(&document)
        .into_iter()
        .filter(|token| looks_like_a_path(token) && resolve(token).is_none())
        .collect();
    assert!(missing.is_empty(), "ARCHITECTURE.md names paths that do not exist: {missing:?}");
}

/// Rust sources of the workspace (not `target/`, nor the code carried in `third_party/`).
fn rust_sources(directory: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(directory).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let skipped = name == "target" || name == "third_party";
        if path.is_dir() && !skipped && !name.to_string_lossy().starts_with('.') {
            rust_sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

/// No test asserts that something took less than a wall-clock time: such a test fails on a
/// loaded machine and proves nothing on an idle one; speed is measured by `raftrain bench`.
#[test]
fn no_test_asserts_an_upper_bound_on_elapsed_time() {
    let mut sources = Vec::new();
    rust_sources(&workspace(), &mut sources);
    assert!(sources.len() > 100, "found the sources");
    let mut offending = Vec::new();
    for file in sources {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let paused = text.contains("start_paused = true");
        for (number, line) in text.lines().enumerate() {
            let bound = line.contains("elapsed") && line.contains('<') && !line.contains(">=");
            if line.contains("assert") && bound && !paused {
                offending.push(format!("{}:{}: {}", file.display(), number + 1, line.trim()));
            }
        }
    }
    assert!(offending.is_empty(), "tests asserting a duration:\n{}", offending.join("\n"));
}
