"""The installed package says its version and ships its type marker, so type checkers (mypy,
pyright) read its annotations."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import raftrain

CARGO_TOML = Path(__file__).resolve().parents[1] / "Cargo.toml"


def test_the_version_is_the_extension_crates():
    crate = re.search(r'^version = "([^"]+)"', CARGO_TOML.read_text(), re.MULTILINE)
    assert crate is not None and raftrain.__version__ == crate.group(1)


def test_the_installed_package_is_marked_typed():
    assert (resources.files("raftrain") / "py.typed").is_file()
    assert Path(raftrain.__file__).parent.name == "raftrain" and "site-packages" in raftrain.__file__
