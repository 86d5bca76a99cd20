"""`python -m raftrain.bench_rendezvous`: torchrun's rendezvous on three raftrain masters against
torch's own backends, side by side in one run on this machine.

Backends: `raftrain` (three `raftrain master` processes on loopback), `c10d` (torch's TCPStore
hosted in the first agent) and `etcd-v2` (torch's etcd backend against a three-member etcd
cluster on loopback, started with `--enable-v2`). Each run starts N agents (`--nnodes=1:N`,
`--nproc-per-node=1`, gloo on the CPU) with a tiny DDP script of its own, and measures:

- join: seconds from the last agent's start to every worker's `init_process_group` returning
  (in a world of N);
- node kill: seconds from `kill -9` of the last agent and everything under it (it hosts no
  rendezvous store) to the first step every survivor trains after the re-rendezvous;
- store-host kill, in a second job of N agents: the same kill of the first agent, the one
  hosting c10d's store (the same position for the others): the job resumes (in seconds), or
  every agent fails (with the error torch prints).

torchrun runs with torch's defaults unless `--rdzv-conf` says otherwise (the same keys for
every backend). Before the first run, torch is imported once, so no backend's first run pays
for a cold page cache. Needs torch, the `raftrain` binary (`RAFTRAIN_BIN` or on PATH), and for etcd-v2
the `etcd` binary and the `python-etcd` package (else etcd-v2 is left out, saying why). Prints
Markdown tables; `--json` also writes every run's figures to a file.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from .bench import free_addr, three_masters

BACKENDS = ("raftrain", "c10d", "etcd-v2")
#: Upper bounds of the benchmark's own waits (a figure past one is reported as missing); the
#: second is the default of `--resume-wait`.
JOIN_WAIT_S = 600.0
RESUME_WAIT_S = 300.0
RESUME_WAIT_S_MAX = 3600.0
#: The pause between a worker's steps; the first kill waits for a step from every worker logged
#: at least `TRAINED_AFTER_JOIN_S` after the join.
STEP_S = 0.2
TRAINED_AFTER_JOIN_S = 0.6
#: The most steps a worker trains (it is killed long before).
STEPS_MAX = 100_000
#: The most repetitions and agents one run accepts.
REPETITIONS_MAX = 20
AGENTS_MAX = 32
POLL_S = 0.05
#: torch's switch that gives each round's workers a TCP store of their own (rank 0's worker
#: hosts it) instead of one the rank-0 agent keeps across rounds.
UNSHARED_STORE = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
#: The masters' Raft timings: etcd's defaults (a heartbeat every 100 ms, elections after 1 to 2
#: s), so both replicated backends meet the same CPU starvation alike. raftrain's own defaults
#: (50 ms, 110 to 200 ms) are for masters on machines of their own: beside 2N torch processes
#: on two cores they keep electing, and `--raft-defaults` measures that.
MASTER_TIMINGS = ("--heartbeat-ms", "100", "--election-timeout-min-ms", "1000", "--election-timeout-max-ms", "2000")


def worker(directory: Path, step_s: float) -> None:
    """The training script torchrun starts on every node: a small DDP model, a line with the
    wall clock right after `init_process_group` returns and one after every step."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    node = os.environ["RAFTRAIN_BENCH_NODE"]
    common = {"world": dist.get_world_size(), "restart": int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))}
    log = open(directory / f"node-{node}.jsonl", "a", buffering=1)
    log.write(json.dumps({"event": "init", "t": time.time(), **common}) + "\n")
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, STEPS_MAX + 1):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log.write(json.dumps({"event": "step", "t": time.time(), "step": step, **common}) + "\n")
        time.sleep(step_s)


def descendants(pid: int) -> List[int]:
    """Every process below `pid`, from /proc (torch starts each worker in a session of its own,
    so a process group does not reach them)."""
    children: Dict[int, List[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class Agent:
    """One torchrun agent (a node) and its worker, in a session of its own."""

    def __init__(self, index: int, args: List[str], directory: Path, env: Dict[str, str]):
        self.index = index
        self.directory = directory
        self.log_path: Path = directory / f"agent-{index}.log"
        env = dict(os.environ, RAFTRAIN_BENCH_NODE=str(index), OMP_NUM_THREADS="1", **env)
        with open(self.log_path, "ab") as log:
            self.process: "subprocess.Popen[bytes]" = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def kill_node(self) -> None:
        """kill -9 of the agent and every process under it: a lost node."""
        for pid in [self.process.pid, *descendants(self.process.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait()

    def lines(self) -> List[Dict[str, Any]]:
        path = self.directory / f"node-{self.index}.jsonl"
        if not path.exists():
            return []
        text = path.read_text(errors="replace")
        return [json.loads(line) for line in text.splitlines() if line.endswith("}")]

    def first(self, event: str, world: int, after: float) -> Optional[float]:
        """When this node's worker first logged `event` in a world of `world` after `after`."""
        times = [line["t"] for line in self.lines() if line["event"] == event and line["world"] == world and line["t"] > after]
        return min(times) if times else None

    def error(self) -> str:
        """The last error line torch printed in this agent's log."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        found = [line.strip() for line in text.splitlines() if "Error:" in line or "Exception:" in line]
        return found[-1][:240] if found else f"exit status {self.process.poll()}"


def wait_for(condition: Callable[[], Optional[float]], limit_s: float) -> Optional[float]:
    """Polls `condition` until it answers a number, for at most `limit_s` seconds."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = condition()
        if value is not None:
            return value
        time.sleep(POLL_S)
    return None


def all_logged(agents: List[Agent], event: str, world: int, after: float) -> Optional[float]:
    """The latest of the nodes' first `event` in a world of `world` after `after`, once every
    node logged one."""
    times = [agent.first(event, world, after) for agent in agents]
    logged = [each for each in times if each is not None]
    return max(logged) if logged and len(logged) == len(times) else None


@dataclass
class Run:
    """One backend's figures for one run of N agents (None: not reached within the wait)."""

    backend: str
    agents: int
    join_s: Optional[float] = None
    node_kill_s: Optional[float] = None
    store_host_kill: str = ""
    store_host_kill_s: Optional[float] = None


@dataclass
class Backend:
    """How torchrun reaches one backend: its name, endpoint and extra `--rdzv-conf` keys per
    agent (`index` -> keys), and the environment every agent gets (the same for all)."""

    name: str
    endpoint: Callable[[], str]
    conf: Callable[[int], List[str]] = field(default=lambda index: [])
    env: Dict[str, str] = field(default_factory=dict)


def torchrun_args(backend: Backend, endpoint: str, run_id: str, agents: int, index: int, conf: List[str], directory: Path) -> List[str]:
    keys = ",".join([*conf, *backend.conf(index)])
    return [
        str(Path(sys.executable).parent / "torchrun"),
        f"--nnodes=1:{agents}",
        "--nproc-per-node=1",
        "--max-restarts=3",
        f"--rdzv-backend={backend.name}",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={run_id}",
        *([f"--rdzv-conf={keys}"] if keys else []),
        "--local-addr=127.0.0.1",
        "-m", "raftrain.bench_rendezvous",
        "--worker", str(directory),
    ]


def store_host_kill(agents: List[Agent], run: Run, resume_wait_s: float) -> None:
    """Kills the first agent (c10d's store host) and records what the others do."""
    survivors = agents[1:]
    killed_at = time.time()
    agents[0].kill_node()

    def outcome() -> Optional[float]:
        resumed = all_logged(survivors, "step", len(survivors), killed_at)
        if resumed is not None:
            return resumed
        return -1.0 if all(agent.process.poll() is not None for agent in survivors) else None

    found = wait_for(outcome, resume_wait_s)
    if found is None:
        run.store_host_kill = f"no step within {resume_wait_s:.0f} s"
    elif found < 0:
        codes = sorted({agent.process.returncode for agent in survivors})
        run.store_host_kill = f"every agent fails (exit {codes}): {survivors[0].error()}"
    else:
        run.store_host_kill_s = found - killed_at
        run.store_host_kill = f"survives, resumes in {run.store_host_kill_s:.1f} s"


def start_job(backend: Backend, agents_count: int, run_id: str, conf: List[str], directory: Path, agents: List[Agent]) -> Optional[float]:
    """Starts `agents_count` agents (into `agents`) in a job of their own; seconds from the
    last start to every worker's `init_process_group` in a world of all, or None."""
    directory.mkdir(parents=True)
    endpoint = backend.endpoint()
    for index in range(agents_count):
        args = torchrun_args(backend, endpoint, run_id, agents_count, index, conf, directory)
        agents.append(Agent(index, args, directory, backend.env))
    started = time.time()
    joined = wait_for(lambda: all_logged(agents, "init", agents_count, 0.0), JOIN_WAIT_S)
    if joined is None:
        return None
    trained = lambda: all_logged(agents, "step", agents_count, joined + TRAINED_AFTER_JOIN_S)  # noqa: E731
    wait_for(trained, JOIN_WAIT_S)
    return joined - started


def measure(backend: Backend, agents_count: int, run_id: str, conf: List[str], directory: Path, resume_wait_s: float) -> Run:
    """Two jobs of `agents_count` agents against `backend`: the join and a node kill in the
    first, the store host's kill in the second."""
    run = Run(backend.name, agents_count)
    agents: List[Agent] = []
    try:
        run.join_s = start_job(backend, agents_count, run_id, conf, directory / "node-kill", agents)
        if run.join_s is None:
            run.store_host_kill = f"no join within {JOIN_WAIT_S:.0f} s: {agents[0].error()}"
            return run
        killed_at = time.time()
        agents[-1].kill_node()
        resumed = wait_for(lambda: all_logged(agents[:-1], "step", agents_count - 1, killed_at), resume_wait_s)
        run.node_kill_s = None if resumed is None else resumed - killed_at
    finally:
        for agent in agents:
            agent.kill_node()
    agents = []
    try:
        if start_job(backend, agents_count, run_id + "-host", conf, directory / "store-host-kill", agents) is None:
            run.store_host_kill = f"no join within {JOIN_WAIT_S:.0f} s: {agents[0].error()}"
            return run
        store_host_kill(agents, run, resume_wait_s)
        return run
    finally:
        for agent in agents:
            agent.kill_node()


@contextlib.contextmanager
def etcd_cluster(binary: str, directory: Path) -> Iterator[List[str]]:
    """Three etcd members on loopback with the v2 API on, killed on exit; yields their client
    addresses."""
    clients = [free_addr() for _ in range(3)]
    peers = [free_addr() for _ in range(3)]
    cluster = ",".join(f"e{index}=http://{peer}" for index, peer in enumerate(peers))
    members = []
    try:
        for index in range(3):
            args = [
                binary, "--name", f"e{index}", "--data-dir", str(directory / f"etcd-{index}"), "--enable-v2",
                "--listen-client-urls", f"http://{clients[index]}", "--advertise-client-urls", f"http://{clients[index]}",
                "--listen-peer-urls", f"http://{peers[index]}", "--initial-advertise-peer-urls", f"http://{peers[index]}",
                "--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", "bench",
            ]
            log = open(directory / f"etcd-{index}.log", "ab")
            members.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))
            log.close()
        if wait_for(lambda: _etcd_healthy(clients), 60.0) is None:
            raise RuntimeError(f"the etcd cluster did not become healthy within 60 s (logs in {directory})")
        yield clients
    finally:
        for member in members:
            member.kill()
            member.wait()


def _etcd_healthy(clients: List[str]) -> Optional[float]:
    """1.0 once every member answers healthy on its client port (etcd's `/health`)."""
    for client in clients:
        try:
            with urllib.request.urlopen(f"http://{client}/health", timeout=2) as answer:
                if json.loads(answer.read()).get("health") != "true":
                    return None
        except (OSError, ValueError):
            return None
    return 1.0


def etcd_missing() -> Optional[str]:
    """Why etcd-v2 cannot run here, or None."""
    if shutil.which("etcd") is None:
        return "no etcd binary on PATH (Debian: apt-get install etcd-server)"
    if importlib.util.find_spec("etcd") is None:
        return "no python-etcd package (pip install python-etcd)"
    return None


def median(values: List[Optional[float]]) -> str:
    found = [value for value in values if value is not None]
    if not found:
        return "none"
    text = f"{statistics.median(found):.2f}"
    return text if len(found) == len(values) else f"{text} ({len(values) - len(found)} missing)"


def ratio(values: List[Optional[float]], baseline: List[Optional[float]]) -> str:
    found = [value for value in values if value is not None]
    base = [value for value in baseline if value is not None]
    return f"{statistics.median(found) / statistics.median(base):.2f}x" if found and base else ""


def report(runs: List[Run], backends: List[str], counts: List[int]) -> None:
    """The tables: medians per backend and agent count, then each store-host kill."""
    print("\nSeconds, the median of the runs; `vs c10d` is the backend's median over c10d's\n")
    print("| agents | backend | runs | join | vs c10d | node kill to resumed | vs c10d |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    for count in counts:
        mine = {name: [run for run in runs if run.backend == name and run.agents == count] for name in backends}
        base = mine.get("c10d", [])
        for name in backends:
            joins, kills = [run.join_s for run in mine[name]], [run.node_kill_s for run in mine[name]]
            vs_join = ratio(joins, [run.join_s for run in base]) if base else ""
            vs_kill = ratio(kills, [run.node_kill_s for run in base]) if base else ""
            print(f"| {count} | {name} | {len(mine[name])} | {median(joins)} | {vs_join} | {median(kills)} | {vs_kill} |")
    hosts = [run for run in runs if run.store_host_kill]
    if hosts:
        print("\nThe first agent (c10d's store host) killed -9, each run\n")
        print("| agents | backend | what happens to the job |\n| ---: | --- | --- |")
        for run in hosts:
            print(f"| {run.agents} | {run.backend} | {run.store_host_kill.replace('|', '/')} |")


def backends_for(names: List[str], stack: contextlib.ExitStack, directory: Path, timings: Sequence[str]) -> List[Backend]:
    """Each named backend, its servers started on `stack` (raftrain masters, etcd members)."""
    found = []
    for name in names:
        if name == "raftrain":
            binary = os.environ.get("RAFTRAIN_BIN") or shutil.which("raftrain")
            if not binary:
                raise SystemExit("no raftrain binary: set RAFTRAIN_BIN or put raftrain on PATH")
            addrs = stack.enter_context(three_masters(binary, directory / "masters", timings))
            found.append(Backend("raftrain", functools.partial(",".join, addrs)))
        elif name == "c10d":
            found.append(Backend("c10d", free_addr, lambda index: [f"is_host={'true' if index == 0 else 'false'}"]))
        elif name == "etcd-v2":
            missing = etcd_missing()
            if missing:
                print(f"etcd-v2 left out: {missing}")
                continue
            etcd = str(shutil.which("etcd"))
            (directory / "etcd").mkdir()
            clients = stack.enter_context(etcd_cluster(etcd, directory / "etcd"))
            found.append(Backend("etcd-v2", functools.partial(str, clients[0])))
        else:
            raise SystemExit(f"unknown backend {name!r}: choose from {', '.join(BACKENDS)}")
    return found


def numbers(text: str, low: int, high: int) -> List[int]:
    values = [int(part) for part in text.split(",") if part.strip()]
    if not values or any(not low <= value <= high for value in values):
        raise argparse.ArgumentTypeError(f"{text!r}: numbers from {low} to {high}, separated by commas")
    return values


@contextlib.contextmanager
def _log_directory(kept: Optional[Path]) -> Iterator[str]:
    if kept is None:
        with tempfile.TemporaryDirectory(prefix="bench-rendezvous-") as temporary:
            yield temporary
        return
    kept.mkdir(parents=True)
    print(f"logs kept in {kept}", file=sys.stderr)
    yield str(kept)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(f"terminated by signal {signum}")


def seconds(text: str) -> float:
    value = float(text)
    if not 0 < value <= RESUME_WAIT_S_MAX:
        raise argparse.ArgumentTypeError(f"{text!r}: seconds, more than 0 and at most {RESUME_WAIT_S_MAX:.0f}")
    return value


def warm_up() -> None:
    """Imports what every agent and worker imports once, before any run is timed: the first
    run on a cold page cache otherwise pays for reading torch from the disk, whichever backend
    it measures."""
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", "import torch.distributed.run, torch.nn.parallel"], check=True)
    print(f"warm-up: torch imported in {time.monotonic() - started:.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m raftrain.bench_rendezvous", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--agents", type=lambda text: numbers(text, 2, AGENTS_MAX), default=[2, 4, 8], help="agent counts, comma-separated (default 2,4,8)")
    parser.add_argument("--repetitions", type=int, default=3, choices=range(1, REPETITIONS_MAX + 1), metavar="R", help="runs of each backend and count; medians reported (default 3)")
    parser.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated, of {', '.join(BACKENDS)} (default all)")
    parser.add_argument("--rdzv-conf", default="", help="torchrun --rdzv-conf keys for every backend alike (default none: torch's defaults)")
    parser.add_argument("--resume-wait", type=seconds, default=RESUME_WAIT_S, metavar="S", help=f"seconds a kill's survivors get to train again before the run reports none (default {RESUME_WAIT_S:.0f})")
    parser.add_argument("--unshared-store", action="store_true", help=f"{UNSHARED_STORE}=1 for every agent: each round's workers get a store of their own, not the rank-0 agent's (whose keys outlive the round)")
    parser.add_argument("--raft-defaults", action="store_true", help="run the masters with raftrain's default Raft timings, not etcd's")
    parser.add_argument("--log-dir", type=Path, help="keep the agents', workers' and servers' logs in this new directory (default: a temporary one, removed)")
    parser.add_argument("--json", type=Path, help="also write every run's figures to this file")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker, STEP_S)
        return
    signal.signal(signal.SIGTERM, _terminated)  # so every agent, master and etcd member is killed
    names = [name.strip() for name in args.backends.split(",") if name.strip()]
    conf = [key for key in args.rdzv_conf.split(",") if key]
    runs: List[Run] = []
    print(f"load average at the start: {' '.join(f'{load:.2f}' for load in os.getloadavg())}", flush=True)
    warm_up()
    with _log_directory(args.log_dir) as temporary, contextlib.ExitStack() as stack:
        backends = backends_for(names, stack, Path(temporary), () if args.raft_defaults else MASTER_TIMINGS)
        for backend in backends:
            backend.env.update({UNSHARED_STORE: "1"} if args.unshared_store else {})
        for repetition in range(args.repetitions):
            for count in args.agents:
                for backend in backends:
                    where = Path(temporary) / f"{backend.name}-{count}-{repetition}"
                    run = measure(backend, count, f"bench-{count}-{repetition}", conf, where, args.resume_wait)
                    print(f"run: {json.dumps(asdict(run))}", flush=True)
                    runs.append(run)
    print(f"load average at the end: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    report(runs, [backend.name for backend in backends], args.agents)
    if args.json:
        args.json.write_text(json.dumps([asdict(run) for run in runs], indent=1))


if __name__ == "__main__":
    main()
