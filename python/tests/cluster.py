"""Real `raftrain` processes for the tests: a group of masters on loopback ports (kill -9,
restart, find the leader), pservers, and the `raftrain` command-line tools. Every process is
killed when its group is stopped (the fixtures do it in `finally` blocks), and the kernel
kills each one if the test process dies first (`PR_SET_PDEATHSIG`)."""

from __future__ import annotations

import concurrent.futures
import ctypes
import itertools
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import raftrain

#: The repository's root (python/tests/ is two levels below it).
ROOT = Path(__file__).resolve().parents[2]

#: Every replica's election timeouts and heartbeats, as the Rust CLI tests use them.
HEARTBEAT_MS = 100
ELECTION_TIMEOUT_MS = (400, 800)
#: How long the tests wait for a cluster to elect, answer or finish before they fail.
SETTLE_S = 30.0


def binary() -> str:
    """The `raftrain` binary: `RAFTRAIN_BIN`, or the workspace's debug build."""
    path = os.environ.get("RAFTRAIN_BIN") or str(ROOT / "target" / "debug" / "raftrain")
    if not os.access(path, os.X_OK):
        raise RuntimeError(
            f"no raftrain binary at {path}: run `cargo build -p cli` or set RAFTRAIN_BIN"
        )
    return path


#: The lowest port free_addr picks, and the ports it handed out so far in this process.
_PICKED_PORT_LOW = 15_000
_picked = itertools.count()


def _ephemeral_port_low() -> int:
    """The first port of the kernel's ephemeral range (what bind(0) and connections use)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ports:
            return int(ports.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def free_addr() -> str:
    """A loopback address nothing listens on right now.

    Picked below the kernel's ephemeral range, one port after another from an offset drawn
    from the process id, never twice in this process: a port picked with bind(0) and released
    can be taken again (by the next bind(0), or as an outgoing connection's local port) before
    the child given it binds it; below the range only an explicit bind can take it.
    """
    low = _PICKED_PORT_LOW
    span = max(_ephemeral_port_low(), low + 1000) - low
    offset = os.getpid() * 7919 % span
    for _ in range(span):
        port = low + (offset + next(_picked)) % span
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return f"127.0.0.1:{port}"
    raise RuntimeError(f"no free loopback port in {low}..{low + span}")


#: prctl(2)'s option that makes the kernel signal a child when its parent dies.
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the test process dies."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


#: The one thread every child is started from. The kernel's "parent death" is the death of the
#: thread that forked the child, so children started from a test's short-lived thread (a
#: nemesis restarting a master) would be killed when it ends; this thread lives as long as
#: the test process.
_SPAWNER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="spawner")


def _spawn(args, **options) -> subprocess.Popen:
    return _SPAWNER.submit(subprocess.Popen, args, preexec_fn=_die_with_parent, **options).result()


def run_tool(*args: str, input: Optional[bytes] = None) -> bytes:
    """Runs a `raftrain` subcommand to its end; its standard output."""
    done = subprocess.run([binary(), *args], input=input, capture_output=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(f"raftrain {' '.join(args)} failed: {done.stderr.decode(errors='replace')}")
    return done.stdout


def leader_log_index(group) -> int:
    """The leader's last log index, as `raftrain status --json` shows each member's."""
    status = json.loads(run_tool("status", "--masters", group.masters, "--json"))
    leader = status["leader"]
    return next(member["last_log_index"] for member in status["members"] if member["id"] == leader)


def entries_of_each(group, passes: int, run_pass) -> list:
    """The leader's log entries during each of `passes` calls of `run_pass()` (one pass of a
    loader each). A test asserts on the fewest: on a loaded machine (a loop and three masters on
    two cores) one pass's end can take more asks, while a loader that stopped gathering its asks
    takes more entries in every pass."""
    entries = []
    for _pass in range(passes):
        before = leader_log_index(group)
        run_pass()
        entries.append(leader_log_index(group) - before)
    return entries


class Processes:
    """Named child processes, each logging to its own file under `dir`."""

    def __init__(self, dir: Path):
        self.dir = dir
        self.children: Dict[str, subprocess.Popen] = {}

    def start(self, name: str, args: Sequence[str]) -> None:
        log = open(self.dir / f"{name}.log", "ab")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "info"))
        self.children[name] = _spawn([binary(), *args], stdout=log, stderr=subprocess.STDOUT, env=env)
        log.close()

    def kill(self, name: str) -> None:
        child = self.children.get(name)
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=10)

    def running(self, name: str) -> bool:
        child = self.children.get(name)
        return child is not None and child.poll() is None

    def log(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop_all(self) -> None:
        for name in list(self.children):
            self.kill(name)


class MasterGroup:
    """Three (or `count`) `raftrain master` replicas on loopback."""

    def __init__(self, dir: Path, count: int = 3, extra_args: Sequence[str] = (), security=None, metrics: bool = False):
        self.dir = dir
        self.processes = Processes(dir)
        self.addrs = [free_addr() for _ in range(count)]
        #: Per replica, where it serves `/metrics` (`metrics=True`), else nothing.
        self.metrics_addrs = [free_addr() for _ in range(count)] if metrics else []
        self.peers = ",".join(f"{index + 1}={addr}" for index, addr in enumerate(self.addrs))
        self.extra_args = list(extra_args)
        #: Per replica: the masters it joins through (`--join`) instead of `--peers`.
        self.joins: List[Optional[str]] = [None] * count
        #: Keyword arguments for clients of this group (TLS files, token).
        self.security: Dict[str, str] = dict(security or {})
        for index in range(count):
            self.spawn(index)

    @property
    def masters(self) -> str:
        return ",".join(self.addrs)

    def spawn(self, index: int) -> None:
        """Starts (or restarts, on its data directory) replica `index` (id `index + 1`)."""
        args = [
            "master",
            "--id", str(index + 1),
            "--listen", self.addrs[index],
            *(["--join", self.joins[index]] if self.joins[index] else ["--peers", self.peers]),
            "--data-dir", str(self.dir / f"master-{index + 1}"),
            "--heartbeat-ms", str(HEARTBEAT_MS),
            "--election-timeout-min-ms", str(ELECTION_TIMEOUT_MS[0]),
            "--election-timeout-max-ms", str(ELECTION_TIMEOUT_MS[1]),
            *self.security_args(),
            *(["--metrics-listen", self.metrics_addrs[index]] if self.metrics_addrs else []),
            *self.extra_args,
        ]
        self.processes.start(f"master-{index + 1}", args)

    def rpcs(self, method: str) -> int:
        """How many `method` calls the replicas served in all, from their `/metrics` (a group
        made with `metrics=True`)."""
        return self._summed(re.compile(r'raftrain_rpc_seconds_count\{[^}]*method="' + re.escape(method) + r'"[^}]*\} (\S+)'))

    def counter(self, name: str) -> int:
        """A counter summed over the replicas' `/metrics` (a group made with `metrics=True`;
        0 where none counted yet)."""
        return self._summed(re.compile(r"^" + re.escape(name) + r"(?:\{[^}]*\})? (\S+)$", re.MULTILINE))

    def _summed(self, pattern: "re.Pattern[str]") -> int:
        """The values `pattern` matches in the replicas' `/metrics`, summed."""
        total = 0.0
        for addr in self.metrics_addrs:
            text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=10).read().decode()
            total += sum(float(count) for count in pattern.findall(text))
        return int(total)

    def add_joiner(self, through: Sequence[str]) -> int:
        """Starts a new replica (id `index + 1`, a new address and directory) that joins the
        group through `through` (`--join`); its index."""
        index = len(self.addrs)
        self.addrs.append(free_addr())
        self.joins.append(",".join(through))
        self.spawn(index)
        return index

    def running(self, index: int) -> bool:
        return self.processes.running(f"master-{index + 1}")

    def security_args(self) -> List[str]:
        flags = {"tls_ca": "--tls-ca", "tls_cert": "--tls-cert", "tls_key": "--tls-key", "token_file": "--token-file"}
        return [item for key, value in self.security.items() for item in (flags[key], str(value))]

    def kill(self, index: int) -> None:
        self.processes.kill(f"master-{index + 1}")

    def status(self, deadline_s: float = SETTLE_S) -> dict:
        return raftrain.status(self.masters, deadline_s=deadline_s, **self.security)

    def leader_index(self) -> int:
        """The index (id - 1) of the leader the linearizable status names."""
        leader = self.status()["leader"]
        assert leader is not None and leader >= 1, "a status answer names its leader"
        return leader - 1

    def logs(self) -> str:
        return "".join(
            f"--- master {index + 1}\n{self.processes.log(f'master-{index + 1}')}" for index in range(len(self.addrs))
        )

    def stop(self) -> None:
        self.processes.stop_all()


class PServers:
    """`count` `raftrain pserver` processes of one job (`job`, or the group's only one), each
    claiming a slot."""

    def __init__(self, dir: Path, masters: str, count: int, job: Optional[str] = None):
        self.processes = Processes(dir)
        checkpoints = dir / "checkpoints"
        checkpoints.mkdir(exist_ok=True)
        for index in range(count):
            args = [
                "pserver",
                "--masters", masters,
                "--listen", free_addr(),
                "--checkpoint-dir", str(checkpoints),
                "--num-pservers", str(count),
            ] + (["--job", job] if job else [])
            self.processes.start(f"pserver-{index}", args)

    def stop(self) -> None:
        self.processes.stop_all()


def wait_until(condition, what: str, timeout_s: float = SETTLE_S, every_s: float = 0.1):
    """Polls `condition` until it returns something true; fails naming `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(every_s)
