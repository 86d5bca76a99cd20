"""The Rust side's log events reach Python's `logging` on the `raftrain` logger's children,
filtered by `RAFTRAIN_LOG`, with the script's handlers and levels, and never as terminal
colour in a pipe; a forked child forwards its own."""

from __future__ import annotations

import os
import subprocess
import sys

from cluster import free_addr

#: Run in a fresh interpreter (a logging configuration and RAFTRAIN_LOG of its own): records
#: what reaches `logging` while a client looks for a master that does not run, then forks a
#: child that does the same.
SCRIPT = """
import logging, os, sys, time
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.name, record.levelno, record.getMessage()))
logging.getLogger("raftrain").addHandler(Keep())
logging.getLogger("raftrain").setLevel(logging.DEBUG)
import raftrain
def look(tag):
    try:
        raftrain.TaskClient(sys.argv[1], deadline_s=1.0).status()
    except raftrain.DeadlineExceeded:
        pass
    time.sleep(1.5)  # the forwarding thread's next wait ends
    client_records = [r for r in records if r[0].startswith("raftrain.client")]
    assert client_records, records
    assert all("\\x1b[" not in message for _, _, message in records), records
    print(tag, "levels", sorted({level for _, level, _ in client_records}))
look("parent")
records.clear()
pid = os.fork()
if pid == 0:
    try:
        look("child")
    finally:
        sys.stdout.flush()
        os._exit(0)
os.waitpid(pid, 0)
"""


def test_rust_events_reach_python_logging_in_parent_and_forked_child():
    environment = dict(os.environ, RAFTRAIN_LOG="client=debug")
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, free_addr()], env=environment, capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.split("\n")
    assert lines[0].startswith("parent levels [10"), run.stdout
    assert lines[1].startswith("child "), run.stdout


def test_rust_events_reach_standard_error_through_python_handlers_without_colour():
    """`logging.basicConfig` prints the Rust side's events as Python formats them: plain text in
    a pipe, no terminal colour."""
    script = (
        "import logging, sys, time\n"
        "logging.basicConfig(level=logging.DEBUG, format='%(name)s %(levelname)s %(message)s')\n"
        "import raftrain\n"
        "try:\n    raftrain.TaskClient(sys.argv[1], deadline_s=1.0).status()\n"
        "except raftrain.DeadlineExceeded:\n    pass\n"
        "time.sleep(1.5)\n"
    )
    environment = dict(os.environ, RAFTRAIN_LOG="client=debug")
    run = subprocess.run([sys.executable, "-c", script, free_addr()], env=environment, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "raftrain.client." in run.stderr and " DEBUG " in run.stderr, run.stderr
    assert "\x1b[" not in run.stderr, run.stderr
