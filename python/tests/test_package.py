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


def test_the_native_stub_names_what_the_extension_has():
    """`raftrain/_native.pyi` and the extension agree on every module-level name and every
    class's public attributes, so type checkers see the calls the Python modules make."""
    import ast

    from raftrain import _native

    stub = ast.parse((resources.files("raftrain") / "_native.pyi").read_text())
    stubbed = {}
    for node in stub.body:
        if isinstance(node, ast.ClassDef):
            members = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
            members |= {item.target.id for item in node.body if isinstance(item, ast.AnnAssign)}
            stubbed[node.name] = members - {"__init__"}
        elif isinstance(node, ast.FunctionDef):
            stubbed[node.name] = None
        elif isinstance(node, ast.AnnAssign) and not node.target.id.startswith("_"):
            stubbed[node.target.id] = None
    native = {name for name in dir(_native) if not name.startswith("_")}
    assert set(stubbed) == native
    for name, members in stubbed.items():
        if members is not None:
            public = {member for member in dir(getattr(_native, name)) if not member.startswith("_")}
            assert members == public, name


def test_the_tests_run_against_the_installed_abi3_wheel():
    """`python/run-tests` installs the wheel it built (one for every CPython from 3.9, on any
    manylinux glibc at least the build machine's), not the source tree."""
    from importlib.metadata import distribution

    wheel = distribution("raftrain").read_text("WHEEL") or ""
    assert "Tag: cp39-abi3-manylinux" in wheel, wheel
