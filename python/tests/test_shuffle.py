"""Shuffled jobs: the masters hand each pass's tasks out in a permutation of (seed, pass), the
same after a leader kill, and `TaskDataset(shuffle=True)` reads every sample exactly once per
pass, in an order that changes between passes and is the same for the same seed, in the
training process and in DataLoader workers alike."""

from __future__ import annotations

import time

import pytest
import torch  # the test environment installs it: a missing torch fails, never skips

import raftrain
from raftrain.torch import REGISTRATIONS_OF_THE_LOOP, TaskDataset

SIZE, SHARD, PASSES = 60, 10, 3


def _walk(client: raftrain.TaskClient, kill=None) -> dict:
    """Every task of the client's job in dispatch order, by pass; `kill(count)` runs after
    each finished task."""
    passes: dict = {}
    for task in client.tasks():
        passes.setdefault(task.pass_index, []).append(task.task_id)
        assert task.finish()
        if kill is not None:
            kill(sum(len(ids) for ids in passes.values()))
    return passes


def test_shuffled_passes_replay_across_a_leader_kill(masters):
    """Job "killed" is walked while its leader is killed (kill -9) mid-way through pass 1;
    job "calm" has the same seed and size and is walked without a kill: both see the same
    permutation in every pass, every task once per pass, and the passes differ."""
    killed = raftrain.TaskClient(masters.masters, name="killed", job="killed")
    killed.report_index_dataset("killed", SIZE * 10, SHARD, passes=PASSES, shuffle=True, seed=99)
    kills = []

    def kill(finished: int) -> None:
        if finished == 60 + 25 and not kills:
            leader = masters.leader_index()
            masters.kill(leader)
            kills.append(leader)
            time.sleep(0.5)
            masters.spawn(leader)

    during = _walk(killed, kill)
    assert kills, "the leader was killed"
    calm = raftrain.TaskClient(masters.masters, name="calm", job="calm")
    calm.report_index_dataset("calm", SIZE * 10, SHARD, passes=PASSES, shuffle=True, seed=99)
    assert _walk(calm) == during, "the same seed replays the same orders, kill or no kill"
    for ids in during.values():
        assert sorted(ids) == list(range(SIZE)), "every task once per pass"
    assert during[0] != during[1] != during[2] and during[0] != sorted(during[0])


def test_another_seed_is_refused_naming_both(masters):
    """The seed is part of the job: a second report with another seed is refused."""
    client = raftrain.TaskClient(masters.masters, name="first", job="seeded")
    client.report_index_dataset("seeded", SIZE, SHARD, passes=1, shuffle=True, seed=1)
    client.report_index_dataset("seeded", SIZE, SHARD, passes=1, shuffle=True, seed=1)
    with pytest.raises(raftrain.InvalidArgument, match="shuffle seed 2.*shuffle seed 1"):
        client.report_index_dataset("seeded", SIZE, SHARD, passes=1, shuffle=True, seed=2)


def _read_passes(masters, job: str, seed: int, **loader_options) -> list:
    """Every pass of a shuffled index job through `TaskLoader`: the batches (one per task) of
    each pass, as lists of indices."""
    read_indices = lambda indices: torch.tensor(indices)
    dataset = TaskDataset(
        masters.masters, index=(job, SIZE, SHARD), read_indices=read_indices, passes=PASSES, batch_size=SHARD, shuffle=True, seed=seed
    )
    loader = dataset.loader(**loader_options)
    passes = []
    while not loader.job_finished:
        batches = [batch.tolist() for batch in loader]
        if batches:
            passes.append(batches)
    return passes


def test_a_shuffled_loader_reads_each_sample_once_per_pass_in_a_seeded_order(masters):
    """Every sample exactly once per pass; the order differs between passes; a second job with
    the same seed reads the same order, and DataLoader workers read each task's samples in the
    same order as the training process."""
    first = _read_passes(masters, "shuffle-a", seed=5, num_workers=0)
    assert len(first) == PASSES
    for batches in first:
        assert sorted(index for batch in batches for index in batch) == list(range(SIZE))
    flat = [[index for batch in batches for index in batch] for batches in first]
    assert flat[0] != flat[1] != flat[2], "each pass has its own order"
    assert flat[0] != list(range(SIZE)), "shuffled"
    assert any(batch != sorted(batch) for batch in first[0]), "samples shuffled within tasks"
    assert _read_passes(masters, "shuffle-b", seed=5, num_workers=0) == first, "the same seed, the same order"
    workers = _read_passes(masters, "shuffle-c", seed=5, num_workers=2)
    by_task = lambda batches: sorted(batches, key=lambda batch: min(batch))
    assert [by_task(batches) for batches in workers] == [by_task(batches) for batches in first], "workers order samples alike"
    other = _read_passes(masters, "shuffle-d", seed=6, num_workers=0)
    assert other != first, "another seed, another order"


MASK = (1 << 64) - 1


def _mix(value: int) -> int:
    """splitmix64's finalizer, written apart from the Rust one the masters use."""
    z = (value + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _rank(seed: int, pass_index: int, task_id: int) -> int:
    """Where a task comes in a pass of a job shuffled with `seed`."""
    return _mix(_mix(seed ^ _mix(pass_index)) ^ task_id)


def test_a_loader_takes_tasks_asked_together_in_the_pass_order(masters, monkeypatch):
    """Without workers, a fast loop's loader asks for eight tasks at once (one replicated write
    for all), which the masters apply in any order, and at a pass's end some of them find
    nothing free: the loop still gets each pass's tasks in the seeded order, each once."""
    counts = []
    step_ahead = raftrain.TaskClient.step_ahead

    def counted(client, finished=(), together=1):
        # A round asked at once is gathered in one call: its count is the round's.
        counts.append(together.count if isinstance(together, raftrain.task_client.AskGather) else together)
        return step_ahead(client, finished, together)

    monkeypatch.setattr(raftrain.TaskClient, "step_ahead", counted)
    size, shard, passes, seed = 400, 10, 2, 7
    read_indices = lambda indices: torch.tensor(indices)
    dataset = TaskDataset(
        masters.masters, index=("paired", size, shard), read_indices=read_indices, passes=passes, batch_size=5, shuffle=True, seed=seed
    )
    loader = dataset.loader(num_workers=0)
    seen = []
    while not loader.job_finished:
        tasks = []
        for batch in loader:
            task = batch[0].item() // shard
            assert {index // shard for index in batch.tolist()} == {task}, "a batch of one task"
            if not tasks or tasks[-1] != task:
                tasks.append(task)
        seen.append((loader.pass_index, tasks))
    assert [pass_index for pass_index, _tasks in seen] == list(range(passes))
    for pass_index, tasks in seen:
        assert tasks == sorted(range(size // shard), key=lambda task: _rank(seed, pass_index, task)), f"pass {pass_index}"
    asked_at_once = REGISTRATIONS_OF_THE_LOOP - 1
    assert counts.count(asked_at_once) >= size // shard, f"asks ahead, each with how many were sent together: {counts}"
