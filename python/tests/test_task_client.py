"""A RecordIO job from Python against three real masters: every record is read once per
pass, each task checked and reported; failures go back to the master with their fault; the
status has the `raftrain status --json` keys; the evaluation is recorded."""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest

import raftrain
from raftrain.task_client import register_together

from cluster import leader_log_index, run_tool, wait_until
from data import FEATURES, write_blobs


def test_a_recordio_job_runs_every_pass_to_the_end(masters, tmp_path):
    """Two clients share a two-pass job: each task's examples arrive checked and decoded,
    every record is trained on exactly once per pass, and the job finishes."""
    examples = write_blobs(tmp_path / "train.recordio", 600, seed=1, max_chunk_bytes=2000)
    first = raftrain.TaskClient(masters.masters, name="first")
    second = raftrain.TaskClient(masters.masters.split(","), name="second")
    sizes = first.report_dataset(str(tmp_path / "*.recordio"), passes=2, job="blobs")
    assert sizes["records"] == 600 and sizes["tasks"] > 4
    assert second.report_dataset(str(tmp_path / "*.recordio"), passes=2, job="blobs") == sizes
    seen = {0: [], 1: []}
    lock = threading.Lock()

    def train(client: raftrain.TaskClient) -> None:
        for task in client.tasks():
            with task:
                features, labels = task.arrays()
                assert features.shape == (task.record_count, FEATURES)
                decoded = list(task.examples())
                assert all(np.array_equal(row, example.dense) for row, example in zip(features, decoded))
                with lock:
                    seen[task.pass_index].extend(labels.tolist())
            assert task.reported == "finished"

    threads = [threading.Thread(target=train, args=(client,)) for client in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    expected = sorted(example.label for example in examples)
    assert sorted(seen[0]) == expected and sorted(seen[1]) == expected
    first.record_eval(1, 0.25, 0.9)
    status = first.status()
    assert status["job_finished"] and status["failed"] == 0
    assert status["eval"]["pass"] == 1 and abs(status["eval"]["accuracy"] - 0.9) < 1e-6
    assert {trainer["name"] for trainer in status["trainers"]} >= {"first", "second"}
    assert first.next_task() is None, "a finished job has no tasks"


def test_status_has_the_keys_of_the_command_line(masters, tmp_path):
    """`TaskClient.status()` and `raftrain.status()` answer the keys `raftrain status --json`
    prints, from the same leader."""
    client = raftrain.TaskClient(masters.masters)
    printed = json.loads(run_tool("status", "--json", "--masters", masters.masters))
    assert set(client.status()) == set(printed)
    assert set(raftrain.status(masters.masters)) == set(printed)
    assert client.status()["leader"] == printed["leader"]


def test_a_failing_block_reports_the_task_failed_and_it_is_retried(masters, tmp_path):
    """An exception inside `with task:` reports the task failed with the exception's text; the
    master hands it out again (its failure budget is not spent up) and the job still ends."""
    write_blobs(tmp_path / "train.recordio", 100, seed=2, max_chunk_bytes=100_000)
    client = raftrain.TaskClient(masters.masters)
    client.report_dataset(str(tmp_path / "train.recordio"), passes=1)
    task = client.next_task()
    with pytest.raises(RuntimeError):
        with task:
            raise RuntimeError("the model diverged")
    assert task.reported == "failed"
    again = client.next_task()
    assert again.task_id == task.task_id and again.dispatch > task.dispatch
    with again:
        assert len(list(again.records())) == 100
    assert client.next_task() is None
    assert client.status()["failed"] == 0


def test_a_truncated_file_fails_the_task_as_this_trainers_fault(masters, tmp_path):
    """A file cut short after the master scanned it: the task's read raises `DataError`, the
    context manager reports it failed as a local fault, and the task goes back to the queue."""
    path = tmp_path / "train.recordio"
    write_blobs(path, 200, seed=3, max_chunk_bytes=1000)
    client = raftrain.TaskClient(masters.masters)
    client.report_dataset(str(path), passes=1)
    os.truncate(path, path.stat().st_size // 2)
    failures = 0
    for task in client.tasks():
        try:
            with task:
                list(task.records())
        except raftrain.DataError as error:
            assert error.fault == "local" and str(path) in error.message
            assert task.reported == "failed"
            failures += 1
            break
    assert failures == 1
    status = client.status()
    assert not status["job_finished"] and status["todo"] + status["pending"] >= 1


def test_a_task_held_by_a_dead_trainer_is_handed_out_again(masters, tmp_path):
    """A trainer that stops heartbeating with a task (a killed process) loses it when its lease
    ends; another trainer gets it with a newer dispatch, and the late report is refused. The
    closed client asks for no more tasks."""
    write_blobs(tmp_path / "train.recordio", 50, seed=4, max_chunk_bytes=100_000)
    dying = raftrain.TaskClient(masters.masters, name="dying")
    dying.report_dataset(str(tmp_path / "train.recordio"), passes=1)
    lost = dying.next_task()
    dying.close()
    survivor = raftrain.TaskClient(masters.masters, name="survivor")
    task = wait_until(lambda: survivor.next_task(), "the task to come back", timeout_s=60)
    assert task.task_id == lost.task_id and task.dispatch > lost.dispatch
    assert lost.finish() is False, "the dead trainer's report is fenced off"
    assert task.finish() is True
    # A closed client takes no more tasks: no heartbeat would keep them.
    for ask in (dying.next_task, dying.step, dying.step_ahead):
        with pytest.raises(raftrain.FailedPrecondition, match="TaskClient was closed"):
            ask()


def test_an_index_job_covers_every_index_once_per_pass(masters):
    """An index dataset (the masters read nothing): every index of `[0, size)` is handed out
    exactly once per pass, in ranges of `shard_size` (the last one shorter); a range has no
    records to read; status names the kind, size and shard size."""
    client = raftrain.TaskClient(masters.masters, name="rows")
    sizes = client.report_index_dataset("rows", 1000, 64, passes=2)
    assert sizes["tasks"] == 16
    assert client.report_index_dataset("rows", 1000, 64, passes=2) == sizes, "a repeat is answered alike"
    with pytest.raises(raftrain.InvalidArgument):
        client.report_index_dataset("rows", 999, 64, passes=2)
    seen = {0: [], 1: []}
    for task in client.tasks():
        with task:
            assert task.chunks == [] and task.end - task.start <= 64
            seen[task.pass_index].extend(task.indices)
            with pytest.raises(raftrain.FailedPrecondition, match="index range"):
                next(task.records())
    assert sorted(seen[0]) == sorted(seen[1]) == list(range(1000))
    status = client.status()
    assert status["job_finished"] and status["failed"] == 0
    assert (status["dataset_kind"], status["dataset_size"], status["shard_size"]) == ("index_range", 1000, 64)


def test_clients_registered_together_share_entries_and_get_their_own_ids(masters):
    """`register_together` registers nine trainers of one job at once: nine ids, each its
    own, in fewer replicated entries than one each (registered one after the other, nine); a
    client registered already keeps its id."""
    first = raftrain.TaskClient(masters.masters, job="together", name="first")
    first.report_index_dataset("together", 90, 10, passes=1)
    known = first.trainer_id
    clients = [first] + [raftrain.TaskClient(masters.masters, job="together", name=f"t{index}") for index in range(8)]
    before = leader_log_index(masters)
    ids = register_together(clients)
    entries = leader_log_index(masters) - before
    assert ids[0] == known and len(set(ids)) == 9, ids
    assert [client.trainer_id for client in clients] == ids
    assert entries < 8, f"{entries} entries for eight registrations"


def test_the_walk_through_the_passes_is_typed_steps(masters):
    """`step()` answers typed steps of the walk: each task of a pass, a held task answered
    again until it is reported, the pass over (naming it) when the next one begins, a wait
    (with its reason and how long) while another trainer holds the rest, and the end; a
    restore puts the walk back where the job is."""
    client = raftrain.TaskClient(masters.masters, name="walker", job="walk")
    other = raftrain.TaskClient(masters.masters, name="other", job="walk")
    client.report_index_dataset("walk", 4, 2, passes=2)
    first = client.step()
    assert first.kind == raftrain.StepKind.Task and first.pass_index == 0
    assert client.step().task.task_id == first.task.task_id, "a held task is answered again"
    held = other.next_task()
    assert held.task_id != first.task.task_id
    checkpoint = client.checkpoint()
    assert first.task.finish() is True
    wait = client.step()
    assert (wait.kind, wait.waiting_for) == (raftrain.StepKind.Wait, raftrain.Waiting.HELD_ELSEWHERE)
    assert 0 < wait.retry_in_s <= 1
    assert held.finish() is True
    over = client.step()
    assert (over.kind, over.ended_pass, over.pass_index) == (raftrain.StepKind.PassOver, 0, 1)
    assert client.pass_index == 1
    assert client.restore(checkpoint, data_only=True)["pass_index"] == 0
    assert client.pass_index == 0
    assert client.step().kind == raftrain.StepKind.Task, "pass 0 again, after the restore"
    done = [task.pass_index for task in client.tasks() if task.finish()]
    assert done == [0, 0, 1, 1]
    assert client.step().kind == raftrain.StepKind.Finished


def test_a_job_that_finished_with_failed_tasks_raises_naming_them(start_masters):
    """A task failed past its budget (none: the job was submitted from Python with its own
    policy, the masters' default allowing retries): the job finishes without its data, and
    neither `tasks()` nor `TaskLoader.job_finished` lets the loop end as if it had succeeded;
    the error names the task and the reason."""
    from raftrain.torch import TaskDataset

    group = start_masters()
    client = raftrain.TaskClient(group.masters, name="failing", job="failing")
    policy = {"max_task_failures": 0, "task_timeout_min_ms": 60000}
    assert client.submit_job("failing", index=(6, 2), passes=1, **policy)["tasks"] == 3
    with pytest.raises(raftrain.InvalidArgument, match="max-task-failures 0; this spec asks 5"):
        client.submit_job("failing", index=(6, 2), passes=1, max_task_failures=5)
    with pytest.raises(raftrain.InvalidArgument, match="unknown policy keys"):
        client.submit_job("failing", index=(6, 2), passes=1, max_failures=5)
    with pytest.raises(raftrain.TasksFailed, match="task 1: the shard is unreadable") as raised:
        for task in client.tasks():
            if task.task_id == 1:
                task.fail("the shard is unreadable")
            else:
                task.finish()
    assert [failed["task"] for failed in raised.value.failed_tasks] == [1]
    read = lambda start, end: None
    dataset = TaskDataset(group.masters, index=("failing", 6, 2), read=read, batch_size=2, passes=1, policy=policy)
    with pytest.raises(raftrain.TasksFailed, match="1 failed tasks"):
        dataset.loader().job_finished


def test_a_huge_exception_still_fails_the_task_and_propagates(masters, tmp_path):
    """An exception whose text is far over what the master keeps (6 MB, two-byte characters)
    comes out of `with task:` unchanged; the failure report, cut by the client to the
    master's bound on a character boundary, is accepted, and the task is handed out again."""
    write_blobs(tmp_path / "train.recordio", 100, seed=3, max_chunk_bytes=100_000)
    client = raftrain.TaskClient(masters.masters)
    client.report_dataset(str(tmp_path / "train.recordio"), passes=1)
    task = client.next_task()
    text = "é" * (3 << 20)
    with pytest.raises(ValueError) as raised:
        with task:
            raise ValueError(text)
    assert str(raised.value) == text, "the user's exception, not the report's"
    assert task.reported == "failed"
    again = client.next_task()
    assert again.task_id == task.task_id and again.dispatch > task.dispatch, "the failure report was accepted"
    again.finish()


@pytest.mark.parametrize("name", ["", "with space", "Upper", "nul\0byte", "-dash", "a" * 64])
def test_a_job_name_that_is_not_a_dns_label_is_refused(masters, tmp_path, name):
    """`report_dataset` and `report_index_dataset` refuse a job name that is not a DNS label
    (lowercase letters, digits, '-' inside, at most 63 bytes), naming the fault, before
    anything reaches the masters; no job is made."""
    write_blobs(tmp_path / "train.recordio", 10, seed=4, max_chunk_bytes=100_000)
    client = raftrain.TaskClient(masters.masters)
    expected = "empty" if name == "" else ("bytes, at most 63" if len(name) == 64 else "is not allowed")
    with pytest.raises(raftrain.InvalidArgument, match=expected):
        client._native.report_dataset(name, [str(tmp_path / "train.recordio")], 1)
    with pytest.raises(raftrain.InvalidArgument, match=expected):
        client._native.report_index_dataset(name, 10, 2, 1)
    assert json.loads(run_tool("job", "list", "--json", "--masters", masters.masters))["jobs"] == []


def test_a_new_client_follows_the_leader_another_client_of_the_process_found(start_masters):
    """A client made after another of the same process found the leader goes to it at once,
    instead of asking every master who leads (a DataLoader worker's eight registrations do so
    every pass): the masters serve it one `ClusterInfo`, its background refresh of the members
    on its connection to the leader, not one from each master first."""
    group = start_masters(metrics=True)
    group.status()
    first = raftrain.TaskClient(group.masters, name="first", job="hinted")
    first.report_index_dataset("hinted", 10, 5, passes=1)
    wait_until(lambda: _unchanged(lambda: group.rpcs("ClusterInfo")), "the first client's calls to settle")
    before = group.rpcs("ClusterInfo")
    second = raftrain.TaskClient(group.masters, name="second", job="hinted")
    assert second.step().kind == raftrain.StepKind.Task
    wait_until(lambda: group.rpcs("ClusterInfo") > before, "the second client's refresh of the members")
    asked = group.rpcs("ClusterInfo") - before
    assert asked == 1, f"{asked} ClusterInfo calls for a client that could follow the leader found"


def _unchanged(count) -> bool:
    """Whether `count()` is the same a moment later."""
    first = count()
    time.sleep(0.3)
    return count() == first
