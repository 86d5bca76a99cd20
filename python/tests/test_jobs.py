"""Named jobs from Python: `TaskClient(job=...)` joins one job of a group that runs several,
progress checkpoints taken and restored from Python, and a cancelled job ends a client's
`tasks()` loop."""

from __future__ import annotations

import json

import pytest

import raftrain

from cluster import run_tool


def covered(client: raftrain.TaskClient) -> dict:
    """Trains `client`'s job to its end: the indices each pass covered, in order."""
    seen: dict = {}
    for task in client.tasks():
        with task:
            seen.setdefault(task.pass_index, []).extend(task.indices)
    return seen


def test_two_jobs_of_one_group_each_get_their_own_tasks(masters):
    """Two index jobs side by side: each client gets only its job's ranges, every index of
    its job once per pass, and each job's status is its own."""
    first = raftrain.TaskClient(masters.masters, name="first", job="a")
    second = raftrain.TaskClient(masters.masters, name="second", job="b")
    assert first.report_index_dataset("a", 20, 3, passes=2)["tasks"] == 7
    assert second.report_index_dataset("b", 9, 4, passes=1)["tasks"] == 3
    assert {pass_index: sorted(indices) for pass_index, indices in covered(first).items()} == {
        0: list(range(20)),
        1: list(range(20)),
    }
    assert {pass_index: sorted(indices) for pass_index, indices in covered(second).items()} == {0: list(range(9))}
    assert first.status()["job"] == "a" and first.status()["dataset_size"] == 20
    assert raftrain.status(masters.masters, job="b")["dataset_size"] == 9
    listed = json.loads(run_tool("job", "list", "--masters", masters.masters, "--json"))
    assert sorted(job["name"] for job in listed["jobs"]) == ["a", "b"]


def test_a_restored_checkpoint_gives_back_the_tasks_done_after_it(masters):
    """A checkpoint id taken from Python (as a model checkpoint would carry it) puts the data
    position back: the tasks done after it come again, the ones before do not."""
    client = raftrain.TaskClient(masters.masters, name="steady", job="r")
    client.report_index_dataset("r", 10, 1, passes=1)
    before, after = [], []
    tasks = client.tasks()
    for done in (before, after):
        for _ in range(4):
            task = next(tasks)
            task.finish()
            done.append(task.start)
        if done is before:
            checkpoint_id = client.checkpoint()
    for bad in (-1, 2**64, 1.9, "abc", True):
        with pytest.raises(raftrain.InvalidArgument, match="checkpoint_id"):
            client.restore(bad)
    with pytest.raises(raftrain.InvalidArgument, match="data_only: True or False"):
        client.restore(checkpoint_id, data_only="no")
    assert client.restore(checkpoint_id) == {"pass_index": 0, "todo": 6, "reloading": 0}
    redone = sorted(index for indices in covered(client).values() for index in indices)
    assert redone == sorted(set(range(10)) - set(before))
    assert set(after) <= set(redone)


def test_a_cancelled_job_ends_the_loop(masters):
    """`raftrain job cancel` stops a Python trainer: its `tasks()` ends, and the status says
    the job was cancelled."""
    client = raftrain.TaskClient(masters.masters, name="cancelled", job="c")
    client.report_index_dataset("c", 100, 1, passes=3)
    taken = 0
    for task in client.tasks():
        with task:
            taken += 1
            if taken == 3:
                run_tool("job", "cancel", "c", "--masters", masters.masters)
    assert taken == 3, "the loop ended at the cancel"
    status = client.status()
    assert status["job_cancelled"] is True and status["job_finished"] is False


def test_jobs_are_listed_and_cancelled_from_python(masters):
    """`jobs()` lists the group's jobs with their incarnation ids; `cancel()` ends one (by
    name, or the client's own), which then never runs again; cancelling it again changes
    nothing."""
    client = raftrain.TaskClient(masters.masters)
    client.submit_job("listed-a", passes=1, index=(100, 10))
    client.submit_job("listed-b", passes=2, index=(50, 10))
    jobs = {job["name"]: job for job in client.jobs()}
    assert {jobs["listed-a"]["state"], jobs["listed-b"]["state"]} <= {"waiting", "running"}
    assert jobs["listed-a"]["job_id"] != jobs["listed-b"]["job_id"]
    client.cancel("listed-a")
    raftrain.TaskClient(masters.masters, job="listed-b").cancel()
    client.cancel("listed-a")
    states = {job["name"]: job["state"] for job in client.jobs()}
    assert states == {"listed-a": "cancelled", "listed-b": "cancelled"}
    with pytest.raises(raftrain.InvalidArgument, match="name the job"):
        client.cancel()


def test_a_loader_of_a_job_that_had_ended_says_so(masters):
    """Running a training script again after its job finished trains nothing: the loader
    raises `JobEnded` instead of an empty loop that exits 0 (`allow_ended=True` opts out)."""
    import torch

    from raftrain.torch import TaskDataset

    rows = torch.arange(20)
    read = ReadRows(rows)
    first = TaskDataset(masters.masters, index=("again", 20, 10), read=read, batch_size=5).loader()
    seen = []
    while not first.job_finished:
        for batch in first:
            seen.extend(batch.tolist())
    assert sorted(seen) == list(range(20))
    second = TaskDataset(masters.masters, index=("again", 20, 10), read=read, batch_size=5).loader()
    with pytest.raises(raftrain.JobEnded, match="'again' had already finished"):
        second.job_finished
    allowed = TaskDataset(masters.masters, index=("again", 20, 10), read=read, batch_size=5).loader(allow_ended=True)
    assert allowed.job_finished and list(allowed) == []


class ReadRows:
    def __init__(self, rows):
        self.rows = rows

    def __call__(self, start, end):
        return self.rows[start:end]


def test_the_readme_example_run_again_raises_and_trains_again_with_restart(masters, tmp_path):
    """The README's example run twice: the second run raises `JobEnded` (job "blobs"
    finished) and exits non-zero; with `--restart` (`restart=True`) it trains again, as a new
    incarnation of "blobs", and the first stays listed as finished."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    examples = Path(__file__).resolve().parents[2] / "examples"
    subprocess.run([sys.executable, str(examples / "make_train_pt.py"), "--examples", "2000"], cwd=tmp_path, check=True)
    environment = dict(os.environ, RAFTRAIN_MASTERS=masters.masters)

    def run(*arguments):
        command = [sys.executable, str(examples / "torch_loop.py"), *arguments]
        return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)

    first = run()
    assert first.returncode == 0 and "accuracy" in first.stdout, first.stderr
    again = run()
    assert again.returncode != 0 and "JobEnded" in again.stderr, again.stderr
    restarted = run("--restart")
    assert restarted.returncode == 0 and "accuracy" in restarted.stdout, restarted.stderr
    listed = json.loads(run_tool("job", "list", "--masters", masters.masters, "--json"))["jobs"]
    blobs = sorted((job["job_id"], job["state"]) for job in listed if job["name"] == "blobs")
    assert [state for _, state in blobs] == ["finished", "finished"], blobs


def test_submit_mirrors_job_submit_and_restart_trains_an_ended_job_again(masters):
    """`TaskClient.submit(spec)` takes `raftrain job submit --spec`'s keys; `restart=True`
    of a running job joins it, of a finished one makes a new incarnation with other passes."""
    client = raftrain.TaskClient(masters.masters, name="spec", job="s")
    spec = {"name": "s", "passes": 1, "index": 4, "shard-size": 2, "task-timeout-min-ms": 60000}
    assert client.submit(spec)["tasks"] == 2
    assert client.submit(spec, restart=True)["tasks"] == 2, "running: a join"
    assert len([job for job in client.jobs() if job["name"] == "s"]) == 1
    assert sorted(covered(client)) == [0]
    with pytest.raises(raftrain.InvalidArgument):
        client.submit({"name": "s", "passes": 1, "index": 4, "shard-size": 2, "colour": "red"})
    base = {"name": "loose", "passes": 1, "index": 4, "shard-size": 2}
    loose = raftrain.TaskClient(masters.masters, name="loose", job="loose")
    for extra, named in [
        ({"shuffle": "false"}, "shuffle: True or False, not 'false'"),
        ({"retry-failed-next-pass": "no"}, "retry_failed_next_pass: True or False"),
        ({"index": 10.7}, "index: a whole number, not 10.7"),
        ({"index": "ten"}, "index: a whole number, not 'ten'"),
        ({"seed": 3}, "seed: only a shuffled job has one"),
        ({"shard_size": 2}, "given twice"),
        ({"dataset": "train.rio", "index": None}, "dataset: a list of RecordIO paths"),
    ]:
        with pytest.raises(raftrain.InvalidArgument, match=named):
            loose.submit({**base, **extra})
    for spec in (None, "name=x"):
        with pytest.raises(raftrain.InvalidArgument, match="a spec is a dict"):
            loose.submit(spec)
    assert not [job for job in client.jobs() if job["name"] == "loose"], "nothing half-applied"
    again = raftrain.TaskClient(masters.masters, name="spec-again", job="s")
    assert again.report_index_dataset("s", 6, 2, passes=2, restart=True)["tasks"] == 3
    assert sorted(covered(again)) == [0, 1], "the new incarnation's own passes"
    listed = [job for job in again.jobs() if job["name"] == "s"]
    assert len(listed) == 2 and len({job["job_id"] for job in listed}) == 2, listed


def test_a_report_of_another_dataset_says_what_the_jobs_state_leaves_to_do(masters):
    """Reporting a job again with other passes (a script edited and run again) is refused
    naming what differs and what to do: a running job is joined with the same dataset or
    cancelled first; a finished one is restarted, which then takes the new passes."""
    client = raftrain.TaskClient(masters.masters, name="again", job="edited")
    client.report_index_dataset("edited", 4, 2, passes=2)
    with pytest.raises(raftrain.InvalidArgument, match=r"passes 3 differ from the reported 2; the job is running \(pass 1 of 2\).*cancel it and then restart it"):
        client.report_index_dataset("edited", 4, 2, passes=3)
    covered(client)
    with pytest.raises(raftrain.InvalidArgument, match=r"passes 3 differ from the reported 2; the job finished.*restart=True"):
        client.report_index_dataset("edited", 4, 2, passes=3)
    again = raftrain.TaskClient(masters.masters, name="again-2", job="edited")
    assert again.report_index_dataset("edited", 4, 2, passes=3, restart=True)["tasks"] == 2
    assert [len(indices) for indices in covered(again).values()] == [4, 4, 4]
