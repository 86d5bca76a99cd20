//! Tidy check of an Architecture Invariant: every gRPC server in the workspace is built by
//! `server_builder(&Security)` and every client endpoint by `Security::endpoint`, so no
//! connection can skip TLS or the token. Only the security module and `service.rs` may call
//! tonic's constructors.

use std::path::{Path, PathBuf};

/// Constructors that would build a server or an endpoint without the process's security.
const CONSTRUCTORS: [&str; 3] =
    ["Server::builder()", "Endpoint::from_shared", "Endpoint::from_static"];

/// The files allowed to call them (they are how everything else gets TLS and the token).
const ALLOWED: [&str; 3] = [
    "platform/src/security/mod.rs",
    "platform/src/security/tls.rs",
    "platform/src/server_builder.rs",
];

/// Every crate's production sources (`*/src/**/*.rs`), relative to the workspace root.
fn production_sources(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending: Vec<PathBuf> = std::fs::read_dir(root)
        .expect("the workspace root is readable")
        .map(|entry| entry.expect("directory entry").path().join("src"))
        .filter(|path| path.is_dir())
        .collect();
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).expect("a source directory is readable") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|extension| extension == "rs") {
                found.push(path.strip_prefix(root).expect("under the root").to_path_buf());
            }
        }
    }
    found
}

#[test]
fn every_server_and_endpoint_goes_through_security() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
    let sources = production_sources(root);
    assert!(sources.len() > 100, "found the workspace's sources: {}", sources.len());
    for relative in sources {
        let name = relative.display().to_string();
        if ALLOWED.contains(&name.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(root.join(&relative)).expect("a readable source");
        for (number, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for constructor in CONSTRUCTORS {
                assert!(
                    !line.contains(constructor),
                    "{name}:{}: {constructor} bypasses TLS and the token; use \
                     platform::server_builder(&security) or Security::endpoint",
                    number + 1
                );
            }
        }
    }
}
