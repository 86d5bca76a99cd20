//! Tidy checks of the workspace's layering, enforced as ordinary tests: which crate may
//! depend on which (read from `cargo metadata`, normal dependencies only), which crates may
//! link openraft or sled, and which source files may name sled.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Every workspace crate and the workspace crates it may depend on (normal dependencies).
/// A new edge is a design decision: add it here with the reason in ARCHITECTURE.md.
const MAY_DEPEND_ON: [(&str, &[&str]); 13] = [
    ("proto", &[]),
    ("storage", &[]),
    ("platform", &[]),
    ("optimizer", &[]),
    ("supervisor", &[]),
    // Every client and every wire contract: the master's and the pservers'.
    ("client", &["proto", "storage", "platform", "optimizer"]),
    ("consensus", &["proto", "storage", "platform"]),
    ("master", &["proto", "storage", "platform", "client", "consensus"]),
    ("pserver", &["proto", "storage", "platform", "optimizer", "client"]),
    // A trainer reaches the pservers through `client::pserver`: it links no pserver.
    ("trainer", &["proto", "storage", "platform", "optimizer", "client"]),
    (
        "simulation",
        &["proto", "storage", "platform", "optimizer", "client", "consensus", "master", "pserver"],
    ),
    // The fault harness reaches Raft, the master and the pservers only over the wire.
    ("jepsen-tests", &["proto", "platform", "optimizer", "client", "trainer", "supervisor"]),
    (
        "cli",
        &[
            "proto",
            "storage",
            "platform",
            "optimizer",
            "client",
            "consensus",
            "master",
            "pserver",
            "trainer",
            "supervisor",
        ],
    ),
];

/// Crates that must link neither openraft nor sled, even through another crate: the client
/// side of the system (and the Python package built on it) carries no Raft node.
const NO_RAFT: [&str; 8] =
    ["proto", "storage", "platform", "optimizer", "client", "pserver", "trainer", "jepsen-tests"];

/// The only files that may name sled: the Raft log, its flusher, and the benchmark baseline
/// that measures the same store.
const SLED_FILES: [&str; 4] = [
    "consensus/src/log_store.rs",
    "consensus/src/flusher.rs",
    "consensus/src/flush_seat.rs",
    "cli/src/bench/raw_sync.rs",
];

/// Each workspace crate's workspace and external normal dependencies, from `cargo metadata`.
struct Graph {
    workspace: BTreeMap<String, BTreeSet<String>>,
    external: BTreeMap<String, BTreeSet<String>>,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root")
}

fn graph() -> Graph {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline", "--manifest-path"])
        .arg(root().join("Cargo.toml"))
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("metadata JSON");
    let packages = metadata["packages"].as_array().expect("a package list");
    let names: BTreeSet<String> =
        packages.iter().filter_map(|package| package["name"].as_str().map(String::from)).collect();
    let (mut workspace, mut external) = (BTreeMap::new(), BTreeMap::new());
    for package in packages {
        let name = package["name"].as_str().expect("a package name").to_string();
        let normal = package["dependencies"]
            .as_array()
            .expect("dependencies")
            .iter()
            .filter(|dependency| dependency["kind"].is_null());
        let (inside, outside): (BTreeSet<String>, BTreeSet<String>) = normal
            .filter_map(|dependency| dependency["name"].as_str().map(String::from))
            .partition(|dependency| names.contains(dependency));
        workspace.insert(name.clone(), inside);
        external.insert(name, outside);
    }
    Graph { workspace, external }
}

impl Graph {
    /// `name` and every workspace crate it reaches.
    fn reach(&self, name: &str) -> BTreeSet<String> {
        let mut reached = BTreeSet::from([name.to_string()]);
        let mut pending = vec![name.to_string()];
        while let Some(next) = pending.pop() {
            for dependency in &self.workspace[&next] {
                if reached.insert(dependency.clone()) {
                    pending.push(dependency.clone());
                }
            }
        }
        reached
    }
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let graph = graph();
    let allowed: BTreeMap<&str, &[&str]> = MAY_DEPEND_ON.into_iter().collect();
    let listed: BTreeSet<&str> = allowed.keys().copied().collect();
    let found: BTreeSet<&str> = graph.workspace.keys().map(String::as_str).collect();
    assert_eq!(found, listed, "every workspace crate has a row in MAY_DEPEND_ON");
    for (name, dependencies) in &graph.workspace {
        for dependency in dependencies {
            assert!(
                allowed[name.as_str()].contains(&dependency.as_str()),
                "{name} depends on {dependency}, which MAY_DEPEND_ON does not allow"
            );
        }
    }
}

#[test]
fn the_client_side_links_neither_openraft_nor_sled() {
    let graph = graph();
    for name in NO_RAFT {
        for reached in graph.reach(name) {
            for forbidden in ["openraft", "sled"] {
                assert!(
                    !graph.external[&reached].contains(forbidden),
                    "{name} links {forbidden} through {reached}"
                );
            }
        }
    }
    assert!(graph.external["consensus"].contains("openraft"), "the check reads real edges");
}

#[test]
fn only_the_raft_log_and_its_baseline_name_sled() {
    let mut pending = vec![root().to_path_buf()];
    let mut naming = BTreeSet::new();
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).expect("a readable directory") {
            let path = entry.expect("a directory entry").path();
            let relative = path.strip_prefix(root()).expect("under the root").to_path_buf();
            // sled itself (`third_party/sled`, patched) is not a user of sled.
            let skipped =
                ["target", ".git", "third_party"].iter().any(|top| relative.starts_with(top));
            if path.is_dir() && !skipped {
                pending.push(path);
            } else if relative.components().any(|part| part.as_os_str() == "src")
                && path.extension().is_some_and(|extension| extension == "rs")
                && std::fs::read_to_string(&path).expect("a readable source").contains("sled::")
            {
                naming.insert(relative.display().to_string());
            }
        }
    }
    let expected: BTreeSet<String> = SLED_FILES.iter().map(|file| file.to_string()).collect();
    assert_eq!(naming, expected, "files naming sled outside the Raft log");
}
