//! The scan's bounds: confinement under `--data-root`, the caps checked while scanning, the
//! cancel flag and the time budget.

use super::*;
use std::os::unix::fs::symlink;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use storage::recordio::{Writer, WriterOptions};

/// A file of `chunk_count` one-record chunks at `path`.
fn write_chunks(path: &Path, chunk_count: usize) {
    std::fs::create_dir_all(path.parent().expect("a file has a directory")).expect("mkdir");
    let file = std::fs::File::create(path).expect("create");
    let mut writer = Writer::new(file, WriterOptions { max_chunk_bytes: 1, ..Default::default() });
    for record in 0..chunk_count {
        writer.write_record(format!("record {record}").as_bytes()).expect("write a record");
    }
    writer.finish().expect("finish");
}

/// A directory `root` with datasets, and `outside` next to it holding a secret that symbolic
/// links inside the root point at:
/// `root/data/{a,b}.rio`, `root/mixed/ok.rio`, `root/mixed/evil.rio -> outside/secret.rio`,
/// `root/escape -> outside`.
struct Tree {
    _directory: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

/// The first bytes of the secret: no message may carry them.
const SECRET: &[u8] = b"root:x:0:0:root:/root:/bin/bash\n";

impl Tree {
    fn new() -> Self {
        let directory = tempfile::tempdir().expect("temporary directory");
        let base = std::fs::canonicalize(directory.path()).expect("resolve the temporary dir");
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("secret.rio"), SECRET).expect("write the secret");
        write_chunks(&root.join("data/a.rio"), 3);
        write_chunks(&root.join("data/b.rio"), 2);
        write_chunks(&root.join("mixed/ok.rio"), 1);
        symlink(outside.join("secret.rio"), root.join("mixed/evil.rio")).expect("symlink");
        symlink(&outside, root.join("escape")).expect("symlink");
        Self { _directory: directory, root, outside }
    }

    fn data_root(&self) -> DataRoot {
        DataRoot::open(&self.root).expect("open the root")
    }
}

fn budget(limits: ScanLimits) -> ScanBudget {
    ScanBudget::new(limits, Arc::new(AtomicBool::new(false)))
}

/// The files a scan lists, or its error message.
fn scan_files(
    patterns: &[&str],
    root: Option<&DataRoot>,
    budget: &mut ScanBudget,
) -> Result<Vec<String>, String> {
    let patterns: Vec<String> = patterns.iter().map(|pattern| pattern.to_string()).collect();
    let scanned = scan_dataset(&patterns, root, budget).map_err(|error| error.to_string())?;
    let mut files: Vec<String> = scanned.chunks.iter().map(|(path, _)| path.to_string()).collect();
    files.dedup();
    Ok(files)
}

/// Under `--data-root`, a pattern or a file outside the root, by `..`, by an absolute path or
/// through a symbolic link (to a directory, or matched by a glob), is refused naming the
/// pattern, the path and the root, before the file is opened (it would fail on its magic, and
/// the message would not name the root); the repeated-report listing refuses the same. A
/// relative pattern is taken relative to the root and stored resolved.
#[test]
fn data_root_confines_patterns_and_files() {
    let tree = Tree::new();
    let root = tree.data_root();
    let inside = |name: &str| tree.root.join(name).display().to_string();
    let check = |pattern: &str, expected: Result<Vec<String>, &str>| {
        let scanned = scan_files(&[pattern], Some(&root), &mut budget(ScanLimits::default()));
        let listed =
            reported_files(&[pattern.to_string()], Some(&root), &mut budget(ScanLimits::default()));
        match expected {
            Ok(files) => {
                assert_eq!(scanned, Ok(files.clone()), "{pattern}");
                let listed: Vec<String> =
                    listed.expect(pattern).into_iter().map(|f| f.path).collect();
                assert_eq!(listed, files, "{pattern}");
            }
            Err(named) => {
                let message = scanned.expect_err(pattern);
                let root_text = tree.root.display().to_string();
                assert!(message.contains("outside --data-root"), "{pattern}: {message}");
                assert!(message.contains(&root_text) && message.contains(named), "{message}");
                assert!(!message.contains("root:x"), "no bytes of the file: {message}");
                let listed = listed.expect_err(pattern).to_string();
                assert!(listed.contains("outside --data-root"), "{pattern}: {listed}");
            }
        }
    };
    let secret = tree.outside.join("secret.rio").display().to_string();
    check("../outside/secret.rio", Err("../outside/secret.rio"));
    // By its text alone: a missing path outside is "outside", not "no match" (no oracle).
    check("../nowhere/*.rio", Err("../nowhere/*.rio"));
    check("data/../../outside/secret.rio", Err("data/../../outside"));
    check("../../../../../../../etc/passwd", Err("etc/passwd"));
    check(&secret, Err(&secret));
    check("escape/secret.rio", Err("escape"));
    check("escape/*.rio", Err("escape"));
    check("**/secret.rio", Err("escape"));
    check("mixed/*.rio", Err("evil.rio"));
    check("mixed/evil.rio", Err("evil.rio"));
    check("data/a.rio", Ok(vec![inside("data/a.rio")]));
    check("./data/../data/*.rio", Ok(vec![inside("data/a.rio"), inside("data/b.rio")]));
    check(&inside("data/b.rio"), Ok(vec![inside("data/b.rio")]));
    check("mixed/ok.rio", Ok(vec![inside("mixed/ok.rio")]));
}

/// Without `--data-root`, any readable path is scanned as before, kept as it was named.
#[test]
fn without_a_root_absolute_paths_are_accepted() {
    let tree = Tree::new();
    let path = tree.root.join("data/a.rio").display().to_string();
    let scanned = scan_files(&[&path], None, &mut budget(ScanLimits::default()));
    assert_eq!(scanned, Ok(vec![path]));
    let secret = tree.outside.join("secret.rio").display().to_string();
    let error = scan_files(&[&secret], None, &mut budget(ScanLimits::default())).unwrap_err();
    assert!(error.contains("not a RecordIO chunk header") && error.contains(&secret), "{error}");
    assert!(!error.contains("root:x") && !error.contains("746f6f72"), "no file bytes: {error}");
}

/// Each cap stops the scan the moment it is passed, naming the cap and the file, before the
/// rest is indexed: `chunk_count` says how many headers were read. A file named twice (60
/// patterns naming one file) is refused while the patterns are expanded, before any header.
#[test]
fn caps_stop_the_scan_when_passed() {
    let tree = Tree::new();
    let (a, b) = (tree.root.join("data/a.rio"), tree.root.join("data/b.rio"));
    let (a, b) = (a.display().to_string(), b.display().to_string());
    let check = |patterns: &[&str], limits: ScanLimits, named: &str, chunk_count: u64| {
        let mut budget = budget(limits);
        let error = scan_files(patterns, None, &mut budget).expect_err("a cap is passed");
        assert!(error.contains(named), "expected {named:?} in: {error}");
        assert_eq!(budget.chunk_count, chunk_count, "{error}");
    };
    let limits = ScanLimits::default();
    let sixty_times: Vec<&str> = vec![a.as_str(); 60];
    check(&sixty_times, limits, &format!("{a} (pattern {a:?}) is the file {a} already"), 0);
    let glob = tree.root.join("data/*.rio").display().to_string();
    check(&[&a, &glob], limits, &format!("{a} (pattern {glob:?}) is the file {a} already"), 0);
    let chunks = ScanLimits { chunk_count_max: 4, ..limits };
    check(
        &[&a, &b],
        chunks,
        &format!("{b} (pattern {b:?}): the dataset passes the cap of 4 chunks"),
        5,
    );
    let files = ScanLimits { file_count_max: 1, ..limits };
    check(
        &[&a, &b],
        files,
        &format!("{b} (pattern {b:?}): the dataset passes the cap of 1 files"),
        0,
    );
    let path = ScanLimits { path_bytes_max: a.len() - 1, ..limits };
    check(&[&a], path, "bytes in one file's path (CHUNK_PATH_BYTES_MAX)", 0);
    let paths = ScanLimits { dataset_path_bytes_max: a.len() + 1, ..limits };
    check(&[&a, &b], paths, &format!("{b} (pattern {b:?}): the dataset passes the cap of"), 0);
    let time = ScanLimits { scan_ms_max: 0, ..limits };
    check(&[&a], time, &format!("pattern {a:?}: the scan took 0 ms, its limit (SCAN_MS_MAX)"), 0);
}

/// A `**` glob over a symbolic link loop (three links back to their directory: 3^40 paths
/// before the kernel's link limit) is refused where the loop closes, naming the pattern,
/// after a handful of entries (it used to walk to the entry cap, taking the leader seconds).
#[test]
fn a_symlink_loop_is_refused_at_once() {
    let tree = Tree::new();
    let looped = tree.root.join("loop");
    std::fs::create_dir(&looped).expect("mkdir");
    for link in ["a", "b", "c"] {
        symlink(".", looped.join(link)).expect("symlink");
    }
    let mut budget = budget(ScanLimits::default());
    let error = scan_files(&["loop/**/*.rio"], Some(&tree.data_root()), &mut budget).unwrap_err();
    let expected = "\"loop/**/*.rio\": `**` reached a directory it is already inside";
    assert!(error.contains(expected), "{error}");
    assert!(budget.entry_count <= 6, "{} entries looked at", budget.entry_count);
}

/// A scan whose cancel flag is set (its request was dropped) stops at its next step.
#[test]
fn a_cancelled_scan_stops() {
    let tree = Tree::new();
    let cancel = Arc::new(AtomicBool::new(true));
    let mut budget = ScanBudget::new(ScanLimits::default(), cancel);
    let error = scan_files(&["data/*.rio"], Some(&tree.data_root()), &mut budget).unwrap_err();
    assert_eq!(error, ScanError::Cancelled.to_string());
    assert_eq!((budget.entry_count, budget.chunk_count), (0, 0));
}

/// A pattern that matches nothing says where the masters looked: under the root, or for a
/// relative pattern in the master's own working directory (the client's may be another).
#[test]
fn a_pattern_matching_nothing_says_where_the_masters_looked() {
    let tree = Tree::new();
    let limits = ScanLimits::default();
    let relative = scan_files(&["nowhere-*.rio"], None, &mut budget(limits)).unwrap_err();
    let cwd = std::env::current_dir().expect("the working directory");
    let expected = format!("relative to its working directory {}", cwd.display());
    assert!(relative.contains(&expected) && relative.contains("the masters read"), "{relative}");
    let rooted = scan_files(&["data/none-*.rio"], Some(&tree.data_root()), &mut budget(limits));
    let rooted = rooted.unwrap_err();
    let expected = format!("under --data-root {}", tree.root.display());
    assert!(rooted.contains(&expected), "{rooted}");
}
