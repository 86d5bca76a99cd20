"""Membership changes under a Python consumer: a `TaskClient` made with the group's three
original addresses keeps taking and finishing tasks while each of those masters is replaced,
one by one, by a new one on a new address (`raftrain master --join`, then `raftrain member
remove` of the old one), and finishes the job after none of the addresses it was given is a
member any more: the Rust client under it learns the members from the leader."""

from __future__ import annotations

import json
import threading
import time

import raftrain

from cluster import run_tool, wait_until
from data import write_blobs


def members(masters: str) -> dict:
    return json.loads(run_tool("member", "list", "--json", "--masters", masters))


def voters(masters: str) -> set:
    return {row["id"] for row in members(masters)["members"] if row["voter"]}


def test_a_python_client_follows_the_group_through_replaced_members(masters, tmp_path):
    write_blobs(tmp_path / "train.recordio", 3000, seed=3, max_chunk_bytes=300)
    original = list(masters.addrs)
    client = raftrain.TaskClient(",".join(original), name="follower")
    sizes = client.report_dataset(str(tmp_path / "train.recordio"), passes=1)
    finished = []
    replaced = []
    #: How many tasks were finished when the last original master left.
    finished_then = []
    failure = []
    stop = threading.Event()

    def replace_all() -> None:
        try:
            for old in range(3):
                new = masters.add_joiner(original)
                current = ",".join(masters.addrs[index] for index in range(len(masters.addrs)) if masters.running(index))
                wait_until(lambda: new + 1 in voters(current), f"member {new + 1} a voter")
                run_tool("member", "remove", str(old + 1), "--masters", current)
                wait_until(lambda: not masters.running(old), f"removed master {old + 1} stopped")
                replaced.append(old)
                if stop.is_set():
                    return
            finished_then.append(len(finished))
        except Exception as error:  # noqa: BLE001 - reported by the test below
            failure.append(error)

    replacer = threading.Thread(target=replace_all)
    replacer.start()
    try:
        for task in client.tasks():
            assert sum(1 for _ in task.records()) == task.record_count
            assert task.finish()
            finished.append(task.task_id)
            # Spread the job over the replacements; after the last one, finish quickly.
            time.sleep(0.15 if len(replaced) < 3 else 0.0)
    finally:
        stop.set()
        replacer.join()
    assert not failure, failure
    assert replaced == [0, 1, 2], f"every original master was replaced: {replaced}"
    assert finished_then and finished_then[0] < sizes["tasks"], "tasks were left after the last replacement"
    assert sorted(finished) == sorted(set(finished)) and len(finished) == sizes["tasks"]
    now = ",".join(masters.addrs[3:])
    assert voters(now) == {4, 5, 6}
    status = raftrain.status(now, deadline_s=30)
    assert status["job_finished"] and status["failed"] == 0
