"""Type checkers see the package's types: mypy and pyright find no error in the installed
`raftrain` nor in the examples the README prints (a user's loop type-checks as written), and
both refuse a script that misuses the API, naming each misused line (the types reach a user's
code: nothing is silently `Any`). No masters: nothing here runs the code it checks."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import List

import pytest
import raftrain

PACKAGE = Path(raftrain.__file__).resolve().parent
EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))
PYRIGHT = Path(sys.executable).parent / "pyright"

#: A user's script, each misuse on a line ending in `# wrong`: a count given as text, an
#: optional pass taken as certain, the version taken for a number, a batch size as text.
MISUSES = """
    from typing import List

    import raftrain
    from raftrain import TaskClient
    from raftrain.torch import TaskDataset

    client = TaskClient("127.0.0.1:7001", job="j")
    client.report_index_dataset("j", "ten", 5, passes=1)  # wrong
    dataset = TaskDataset("127.0.0.1:7001", index=("j", 10, 5), read=lambda start, end: None, batch_size=5, passes=1)
    loader = dataset.loader()
    current: int = loader.pass_index  # wrong
    minor: int = raftrain.__version__  # wrong
    TaskDataset("127.0.0.1:7001", index=("j", 10, 5), read=lambda start, end: None, batch_size="5", passes=1)  # wrong
"""


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory) -> Path:
    """One mypy cache for the module's runs (torch's types are read once, not per run)."""
    return tmp_path_factory.mktemp("mypy-cache")


def mypy(cache: Path, tmp_path: Path, *targets: str) -> subprocess.CompletedProcess:
    """mypy over `targets` (third-party packages without types, as accelerate, are taken as `Any`)."""
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(cache), "--disable-error-code", "import-untyped", *targets]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)


def pyright(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess:
    """pyright (the one its wheel bundles) with `arguments`, resolving imports in this
    interpreter's environment; its wrapper's look for a newer release on PyPI is off (no
    network at run time)."""
    command = [str(PYRIGHT), "--pythonpath", sys.executable, *arguments]
    environment = {
        **os.environ,
        "PYRIGHT_PYTHON_IGNORE_WARNINGS": "1",
        "PYRIGHT_PYTHON_USE_BUNDLED_PYRIGHT": "1",
        # `--verifytypes` finds the package through the active environment.
        "VIRTUAL_ENV": sys.prefix,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=environment)


def assert_clean(checked: subprocess.CompletedProcess) -> None:
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_mypy_and_pyright_find_no_error_in_the_installed_package(mypy_cache, tmp_path):
    assert_clean(mypy(mypy_cache, tmp_path, "-p", "raftrain"))
    checked = pyright(tmp_path, str(PACKAGE))
    assert_clean(checked)
    assert re.search(r"\b0 errors\b", checked.stdout), checked.stdout


def test_every_public_symbol_has_a_known_type(tmp_path):
    """pyright's `--verifytypes`: every symbol of the public modules, and of the private ones
    the public API hands out (`TaskLoader`, `Registration`...), has a declared type, so a
    user's checker never meets an `Unknown` from this package (other packages' aside)."""
    checked = pyright(tmp_path, "--verifytypes", "raftrain", "--ignoreexternal")
    assert "Type completeness score: 100%" in checked.stdout, checked.stdout
    assert checked.returncode == 0, checked.stdout


@pytest.mark.parametrize("example", EXAMPLES, ids=[example.name for example in EXAMPLES])
def test_the_readmes_examples_type_check_as_written(mypy_cache, tmp_path, example):
    assert_clean(mypy(mypy_cache, tmp_path, str(example)))
    assert_clean(pyright(tmp_path, str(example)))


def test_both_checkers_refuse_each_misuse_of_the_api_naming_its_line(mypy_cache, tmp_path):
    script = tmp_path / "misuse.py"
    script.write_text(textwrap.dedent(MISUSES))
    wrong = [number for number, line in enumerate(script.read_text().splitlines(), 1) if line.endswith("# wrong")]
    assert len(wrong) == 4
    for checked, named in ((mypy(mypy_cache, tmp_path, str(script)), r"misuse\.py:{}: error"), (pyright(tmp_path, str(script)), r"misuse\.py:{}:\d+ - error")):
        assert checked.returncode != 0, checked.stdout
        output = checked.stdout
        missing: List[int] = [number for number in wrong if not re.search(named.format(number), output)]
        assert not missing, f"lines {missing} not refused:\n{output}"
        flagged = {int(number) for number in re.findall(r"misuse\.py:(\d+):", output)}
        assert flagged == set(wrong), output
