"""Real `torchrun` with `--rdzv-backend=raftrain`: elastic DDP (gloo, CPU) whose rendezvous
lives in three real masters. One run goes through the faults an elastic job meets: the master
leader killed -9 while two agents train (training goes on, no worker restarts), a whole node
(an agent and its worker) killed -9 while the leader is killed again (the survivor
re-rendezvouses and trains on alone from the script's checkpoint), a third agent started (the
world grows back to two), and the last step reached, with every surviving agent exiting 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from cluster import SETTLE_S, wait_until
from raftrain.bench_rendezvous import descendants

SCRIPT = Path(__file__).resolve().parent / "torchrun_train.py"
#: Steps the job trains in all, and how long each takes.
STEPS = 400
STEP_S = 0.2
#: torch's dynamic rendezvous, tightened so a test's faults are noticed within seconds: a
#: node is dead after 5 missed keep-alives 2 s apart (longer than a leader failover), a round
#: closes 1 s after the minimum.
RDZV_CONF = "last_call_timeout=1,join_timeout=120,close_timeout=30,keep_alive_interval=2,keep_alive_max_attempt=5,read_timeout=60"


def torchrun() -> str:
    """The `torchrun` the virtual environment's torch installed."""
    return str(Path(sys.executable).parent / "torchrun")


class Agent:
    """One torchrun agent (a node) with its workers, in a process group of its own."""

    def __init__(self, name: str, masters: str, directory: Path, local_addr: str):
        self.name = name
        self.log_path = directory / f"agent-{name}.log"
        env = dict(os.environ, RAFTRAIN_TEST_NODE=name, OMP_NUM_THREADS="1", LOGLEVEL="INFO")
        args = [
            torchrun(),
            "--nnodes=1:3",
            "--nproc-per-node=1",
            "--max-restarts=5",
            "--monitor-interval=0.5",
            "--rdzv-backend=raftrain",
            f"--rdzv-endpoint={masters}",
            "--rdzv-id=elastic-run",
            f"--rdzv-conf={RDZV_CONF}",
            f"--local-addr={local_addr}",
            str(SCRIPT),
            "--steps", str(STEPS),
            "--dir", str(directory),
            "--step-s", str(STEP_S),
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def kill_node(self) -> None:
        """kill -9 of the agent and every process under it (torch starts each worker in a
        session of its own): a lost node."""
        for pid in [self.process.pid, *descendants(self.process.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def steps(directory: Path, name: str) -> List[Dict]:
    path = directory / f"steps-{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def last(directory: Path, name: str) -> Dict:
    lines = steps(directory, name)
    return lines[-1] if lines else {"step": 0, "world": 0, "restart": -1}


#: The first two nodes' address. torch ranks a round's nodes in the order of their addresses
#: (then process ids), so the newcomer's address decides whether the surviving node stays
#: rank 0 (and must publish its store again) or becomes rank 1 (and must find the newcomer's).
FIRST_NODES_ADDR = "127.0.0.2"


@pytest.mark.parametrize("newcomer_addr", ["127.0.0.3", "127.0.0.1"], ids=["newcomer-ranks-last", "newcomer-ranks-first"])
def test_an_elastic_job_survives_leader_kills_a_lost_node_and_grows_again(masters, tmp_path, newcomer_addr):
    agents = {name: Agent(name, masters.masters, tmp_path, FIRST_NODES_ADDR) for name in ("a", "b")}
    try:
        run(masters, agents, tmp_path, newcomer_addr)
    except BaseException:
        for agent in agents.values():
            print(f"--- agent {agent.name}\n{agent.log()[-6000:]}")
        raise
    finally:
        for agent in agents.values():
            agent.kill_node()


def run(masters, agents: Dict[str, Agent], directory: Path, newcomer_addr: str) -> None:
    wait_until(lambda: last(directory, "a")["step"] >= 5 and last(directory, "b")["step"] >= 5,
               "both nodes to train in a world of 2", timeout_s=120)
    assert last(directory, "a")["world"] == 2

    # The leader dies: the agents' keep-alives wait for the next one; the workers never notice.
    before = {name: last(directory, name) for name in agents}
    leader = masters.leader_index()
    masters.kill(leader)
    time.sleep(3)
    masters.spawn(leader)
    wait_until(lambda: all(last(directory, name)["step"] >= before[name]["step"] + 15 for name in agents),
               "training to go on after the leader was killed", timeout_s=SETTLE_S)
    for name in agents:
        now = last(directory, name)
        assert (now["restart"], now["pid"]) == (before[name]["restart"], before[name]["pid"]), \
            f"node {name}'s worker was restarted by a master's death"

    # A node is lost while the leader dies again: b trains on alone from the checkpoint.
    agents["a"].kill_node()
    masters.kill(masters.leader_index())
    wait_until(lambda: last(directory, "b")["world"] == 1, "node b to train on alone", timeout_s=120)
    alone = last(directory, "b")
    assert alone["restart"] > before["b"]["restart"], "b's worker was restarted for the new world"
    for index in range(len(masters.addrs)):
        if not masters.processes.running(f"master-{index + 1}"):
            masters.spawn(index)

    # A new node joins: the world grows back to two.
    agents["c"] = Agent("c", masters.masters, directory, newcomer_addr)
    wait_until(lambda: last(directory, "c")["world"] == 2 and last(directory, "b")["world"] == 2,
               "the world to grow back to two", timeout_s=120)

    # The job reaches its last step; every surviving agent exits 0.
    for name in ("b", "c"):
        assert agents[name].process.wait(timeout=STEPS * STEP_S + 120) == 0, f"agent {name} failed"
    assert last(directory, "b")["step"] == STEPS == last(directory, "c")["step"]
    walked = [line["step"] for line in steps(directory, "b")]
    assert all(later >= earlier - 2 for earlier, later in zip(walked, walked[1:])), \
        "b resumed from the script's checkpoint (a step or two again at most), never from the start"
