"""Stamps across leader kills: a Python trainer keeps taking and reporting tasks while the
leader is killed (kill -9) and restarted, again and again. Every report is a stamped write
retried with its stamp by the Rust client; a report applied twice would be answered "not
pending" (False) the second time, so every report answering True, every task finished once
per pass and none failed shows each was applied exactly once."""

from __future__ import annotations

import threading
import time

import raftrain

from data import write_blobs

#: Leader kills during the job, and the pause between one and the next.
KILLS = 3
BETWEEN_KILLS_S = 1.5


def test_reports_are_applied_once_across_leader_kills(masters, tmp_path):
    write_blobs(tmp_path / "train.recordio", 400, seed=5, max_chunk_bytes=400)
    client = raftrain.TaskClient(masters.masters, name="survivor")
    sizes = client.report_dataset(str(tmp_path / "train.recordio"), passes=2)
    finished = []
    answers = []
    stop = threading.Event()
    kills = []

    def kill_leaders() -> None:
        while len(kills) < KILLS and not stop.wait(BETWEEN_KILLS_S):
            leader = masters.leader_index()
            masters.kill(leader)
            kills.append(leader)
            time.sleep(0.5)
            masters.spawn(leader)

    killer = threading.Thread(target=kill_leaders)
    killer.start()
    try:
        for task in client.tasks():
            records = sum(1 for _ in task.records())
            assert records == task.record_count
            answers.append(task.finish())
            finished.append((task.pass_index, task.task_id))
            time.sleep(0.02)  # spread the job over the kills
    finally:
        stop.set()
        killer.join()
    assert kills, "the job ended before any leader was killed; make it longer"
    assert all(answers), f"a report answered False: {answers}"
    for pass_index in (0, 1):
        ids = [task_id for index, task_id in finished if index == pass_index]
        assert len(ids) == len(set(ids)) == sizes["tasks"], f"pass {pass_index}: {sorted(ids)}"
    status = masters.status()
    assert status["job_finished"] and status["failed"] == 0
    assert status["dispatched"] == 2 * sizes["tasks"], "no task was handed out twice"
