//! Tidy checks: the state machine's Architecture Invariants, enforced as ordinary tests.

use std::path::Path;

/// Words whose presence in code (not comments) would break determinism or purity, or bring
/// protobuf types into the state machine.
const FORBIDDEN: [&str; 11] = [
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
    "proto::",
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

/// The state machine's files form no import cycle larger than a pair: a file's code (not its
/// tests) reaching another through `use super::...` (or `super::x::` in code) is an edge, and every strongly
/// connected set of files has at most two. A knot of many files (once seventeen, made by three
/// imports of a type through the file that re-exported it) makes each change reach them all.
#[test]
fn the_state_files_form_no_import_knot() {
    let sources = state_sources();
    let names: Vec<String> = sources.iter().map(|(path, _)| module_of(path)).collect();
    let edges: Vec<Vec<usize>> = sources
        .iter()
        .map(|(_, text)| {
            let code = code_of(text);
            (0..names.len()).filter(|other| imports(&code, &names[*other])).collect()
        })
        .collect();
    for component in strongly_connected(&edges) {
        let files: Vec<&str> = component.iter().map(|index| names[*index].as_str()).collect();
        assert!(files.len() <= 2, "an import cycle of {} files: {files:?}", files.len());
    }
}

/// `text` without its comment lines and its tests (the `#[cfg(test)]` module at its end):
/// the knot that matters is the one the state machine's own code makes.
fn code_of(text: &str) -> String {
    let production = text.split("\n#[cfg(test)]").next().unwrap_or_default();
    let lines = production.lines().filter(|line| !line.trim_start().starts_with("//"));
    lines.collect::<Vec<_>>().join("\n")
}

/// Whether `code` names sibling module `module` (`super::module::` or `super::module;`).
fn imports(code: &str, module: &str) -> bool {
    ["::", ";"].iter().any(|after| code.contains(&format!("super::{module}{after}")))
}

/// `src/state/job_state.rs` -> `job_state`.
fn module_of(path: &str) -> String {
    let file = Path::new(path).file_stem().expect("a file name");
    file.to_string_lossy().into_owned()
}

/// The strongly connected components of a graph given as each node's successors (Tarjan).
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct Walk<'a> {
        edges: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        components: Vec<Vec<usize>>,
    }
    impl Walk<'_> {
        fn visit(&mut self, node: usize) {
            self.index[node] = Some(self.next);
            self.low[node] = self.next;
            self.next += 1;
            self.stack.push(node);
            self.on_stack[node] = true;
            for &successor in &self.edges[node] {
                match self.index[successor] {
                    None => {
                        self.visit(successor);
                        self.low[node] = self.low[node].min(self.low[successor]);
                    }
                    Some(index) if self.on_stack[successor] => {
                        self.low[node] = self.low[node].min(index);
                    }
                    Some(_) => {}
                }
            }
            if Some(self.low[node]) == self.index[node] {
                let mut component = Vec::new();
                while let Some(member) = self.stack.pop() {
                    self.on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                self.components.push(component);
            }
        }
    }
    let count = edges.len();
    let mut walk = Walk {
        edges,
        index: vec![None; count],
        low: vec![0; count],
        on_stack: vec![false; count],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for node in 0..count {
        if walk.index[node].is_none() {
            walk.visit(node);
        }
    }
    walk.components
}

/// The walk finds a knot of three, and pairs and singles are components of their own.
#[test]
fn the_knot_finder_finds_knots() {
    let edges = vec![vec![1], vec![2], vec![0, 3], vec![4], vec![3]];
    let mut sizes: Vec<usize> = strongly_connected(&edges).iter().map(Vec::len).collect();
    sizes.sort();
    assert_eq!(sizes, vec![2, 3]);
}
