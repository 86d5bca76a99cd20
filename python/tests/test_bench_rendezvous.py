"""`python -m raftrain.bench_rendezvous` keeps working: a short run (two agents, one repetition,
raftrain and c10d, etcd-v2 too when the etcd binary and python-etcd are here) prints its table
with a number in every figure. No timing is asserted: the figures are the benchmark's to report.
A round closes a second after its minimum and a lost node is noticed within two seconds
(`last_call_timeout=1`, `keep_alive_interval=1`, `keep_alive_max_attempt=2`) to keep the run short."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cluster import binary

from raftrain.bench_rendezvous import etcd_missing

#: The longest the short run may take before the test gives up on it (and stops it).
RUN_LIMIT_S = 600


def _log_tails(directory: Path, lines: int = 25) -> str:
    """The last `lines` lines of every log the benchmark kept (each agent with its worker)."""
    tails = []
    for log in sorted(directory.rglob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        tails.append(f"--- {log.relative_to(directory)}\n" + "\n".join(text))
    return "\n".join(tails)


@pytest.mark.timeout(RUN_LIMIT_S + 120)
def test_the_benchmark_prints_a_number_for_every_backend(tmp_path):
    backends = ["raftrain", "c10d"] + ([] if etcd_missing() else ["etcd-v2"])
    output = tmp_path / "runs.json"
    args = [
        sys.executable, "-m", "raftrain.bench_rendezvous",
        "--agents", "2",
        "--repetitions", "1",
        "--backends", ",".join(backends),
        "--rdzv-conf", "last_call_timeout=1,keep_alive_interval=1,keep_alive_max_attempt=2",
        "--resume-wait", "30",
        "--json", str(output),
        "--log-dir", str(tmp_path / "logs"),
    ]
    bench = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ, RAFTRAIN_BIN=binary()))
    try:
        stdout, _ = bench.communicate(timeout=RUN_LIMIT_S)
    except subprocess.TimeoutExpired:
        # SIGTERM: the benchmark kills its agents, masters and etcd members.
        bench.terminate()
        stdout, _ = bench.communicate(timeout=60)
        pytest.fail(f"the benchmark ran past {RUN_LIMIT_S} s:\n{stdout}\n{_log_tails(tmp_path / 'logs')}")
    done = subprocess.CompletedProcess(args, bench.returncode, stdout, "")
    assert done.returncode == 0, done.stdout + _log_tails(tmp_path / "logs")
    figure = r"(\d+\.\d+)"
    for name in backends:
        row = re.search(rf"^\| 2 \| {re.escape(name)} \| 1 \| {figure} \| [^|]* \| {figure} \| [^|]* \|$", done.stdout, re.MULTILINE)
        assert row is not None, f"no row with numbers for {name}:\n{done.stdout}"
    assert re.search(rf"^\| 2 \| raftrain \| 1 \| {figure} \| {figure}x \| {figure} \| {figure}x \|$", done.stdout, re.MULTILINE), \
        f"raftrain's row compares with c10d:\n{done.stdout}"
    for name in backends:
        assert re.search(rf"^\| 2 \| {re.escape(name)} \| (survives|every agent fails|no step within)", done.stdout, re.MULTILINE), \
            f"no store-host kill row for {name}:\n{done.stdout}"
    assert output.read_text().count('"backend"') == len(backends)
