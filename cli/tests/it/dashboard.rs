//! `deploy/grafana/raftrain.json` parses as a dashboard, and every metric its queries name is
//! one the code exports (a `"raftrain_..."` name in a metrics call), so it cannot drift.

use std::collections::BTreeSet;
use std::path::Path;

const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Every `raftrain_*` identifier in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("raftrain_") {
        let tail = &rest[start..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// The `raftrain_*` names in the Rust sources of every crate.
fn exported() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut dirs: Vec<std::path::PathBuf> =
        ["platform", "consensus", "master", "pserver", "trainer"]
            .iter()
            .map(|name| Path::new(WORKSPACE).join(name).join("src"))
            .collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                for line in text.lines().filter(|line| line.contains("metrics::")) {
                    names.extend(metric_names(line));
                }
            }
        }
    }
    names
}

#[test]
fn every_dashboard_metric_is_exported() {
    let path = Path::new(WORKSPACE).join("deploy/grafana/raftrain.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("the dashboard"))
            .expect("JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "a dashboard worth opening");
    let exported = exported();
    for panel in panels {
        let targets = panel["targets"].as_array().expect("every panel queries something");
        for target in targets {
            let expr = target["expr"].as_str().expect("a PromQL expression");
            for name in metric_names(expr) {
                let base = ["_bucket", "_count", "_sum"]
                    .iter()
                    .find_map(|suffix| name.strip_suffix(suffix))
                    .unwrap_or(&name);
                assert!(
                    exported.contains(base) || exported.contains(&name),
                    "panel {:?} queries {name}, which nothing exports",
                    panel["title"]
                );
            }
        }
    }
}
