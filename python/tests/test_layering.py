"""The Python package is the client side of the system: its extension links no pserver and no
trainer, and neither openraft nor sled (the workspace's `tidy_layers` test holds the Rust crates to this; the
extension is its own workspace, so its lock file is checked here)."""

from __future__ import annotations

import re

from cluster import ROOT


def test_the_extension_links_no_raft_node():
    lock = (ROOT / "python" / "Cargo.lock").read_text()
    packages = set(re.findall(r'^name = "([^"]+)"$', lock, flags=re.MULTILINE))
    assert {"pyo3", "client", "optimizer", "storage"} <= packages
    # No server, and no trainer: its models, ndarray, safetensors and clap stay out of the wheel.
    servers = {"openraft", "sled", "consensus", "master", "pserver", "trainer", "ndarray"}
    assert not packages & servers, sorted(packages & servers)
