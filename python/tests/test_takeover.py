"""A `TaskDataset` made again for the same job in the same process (a notebook cell run again
after its loop stopped inside a pass) takes the job over from the old one as it begins to
iterate: the old one's trainers, which still heartbeat from this process, leave the job, so
the tasks they hold go back at once instead of at their timeout (persistent DataLoader workers
holding tasks are shut down). An iteration suspended while
a newer one of its job began (of another dataset, or of the same one: the registrations are
the dataset's) raises a clear error at its next step instead of taking the newer one's answers
or waiting for its tasks; with DataLoader workers (persistent ones too), its workers are shut
down and their trainers leave the job as the newer one begins."""

from __future__ import annotations

import collections

import pytest
import torch

import raftrain
from raftrain.torch import REGISTRATIONS_OF_THE_LOOP, TaskDataset


class _Rows:
    """`read(start, end)` over a tensor of sample ids."""

    def __init__(self, rows):
        self.rows = rows

    def __call__(self, start, end):
        return self.rows[start:end]


def _trainers(masters, prefix: str) -> list:
    return [trainer for trainer in masters.status()["trainers"] if trainer["name"].startswith(prefix)]


def _dataset(masters, name: str) -> TaskDataset:
    return TaskDataset(masters.masters, index=("again", 40, 10), read=_Rows(torch.arange(40)), passes=2, batch_size=5, name=name)


def test_a_dataset_made_again_takes_its_job_over_from_the_one_that_stopped(masters):
    """The first loop stops inside task 1 (task 0 consumed, its finish held for an ask), its
    trainers holding tasks asked ahead. The second dataset's first batch comes after the first
    one's trainers left: it trains the rest of the pass, task 1 whole again, task 0 not again,
    and its iteration ends with the pass. Iterated again, the first dataset registers new
    trainers and takes the job back for the next pass."""
    first = _dataset(masters, "first").loader()
    seen = collections.Counter()
    for index, batch in enumerate(first):
        seen.update(batch.tolist())
        if index == 2:
            break
    assert len(_trainers(masters, "first-")) == REGISTRATIONS_OF_THE_LOOP
    assert masters.status()["pending"] > 0, "the first dataset's trainers hold tasks"

    second = _dataset(masters, "second").loader()
    batches = iter(second)
    seen.update(next(batches).tolist())
    assert _trainers(masters, "first-") == [], "the first dataset's trainers left the job"
    for batch in batches:
        seen.update(batch.tolist())
    status = masters.status()
    assert status["pass"] == 1 and second.pass_index == 0 and status["failed"] == 0
    assert sorted(seen) == list(range(40))
    assert [sample for sample, count in seen.items() if count > 1] == list(range(10, 15)), "task 1's batch consumed before the stop, again"

    again = sorted(torch.cat(list(first)).tolist())
    assert again == list(range(40)) and first.pass_index == 1
    assert _trainers(masters, "second-") == [] and len(_trainers(masters, "first-")) == REGISTRATIONS_OF_THE_LOOP
    assert masters.status()["job_finished"]


def test_an_iteration_suspended_while_another_dataset_took_its_job_over_raises(masters):
    """Two loaders of one job iterated in turn in one thread would each wait at its pass's end
    for tasks the other holds (until their timeout). The one that began second takes the job
    over; the first, resumed, raises `FailedPrecondition` saying why at its next step."""
    first = iter(_dataset(masters, "first").loader())
    next(first)
    second = _dataset(masters, "second").loader()
    assert sorted(torch.cat(list(second)).tolist()) == list(range(40)), "the first one's task whole, every sample once"
    with pytest.raises(raftrain.errors.FailedPrecondition, match="a newer one began in this process while it was suspended"):
        for _batch in first:
            pass
    assert masters.status()["failed"] == 0


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("newer", ["the same loader", "another loader of the dataset"])
def test_an_iteration_suspended_while_a_newer_one_of_its_dataset_ran_raises(masters, newer, workers):
    """An iterator kept (`it = iter(loader); next(it)`), then a loop over the dataset: the
    newer iteration trains the pass (the suspended one's task whole again: its batch was not
    reported); the suspended one, resumed, raises at its next step rather than taking the newer
    one's answers. Without workers the newer one walks the dataset's registrations; with them,
    the suspended one's workers are shut down and their trainers leave the job as the newer one
    begins, or its pass would wait for their tasks' timeouts."""
    dataset = _dataset(masters, "first")
    loader = dataset.loader(num_workers=workers)
    suspended = iter(loader)
    next(suspended)
    other = loader if newer == "the same loader" else dataset.loader(num_workers=workers)
    assert sorted(torch.cat(list(other)).tolist()) == list(range(40)), "every sample of the pass once"
    with pytest.raises(raftrain.errors.FailedPrecondition, match="a newer one began in this process while it was suspended"):
        for _batch in suspended:
            pass
    status = masters.status()
    assert status["pass"] == 1 and status["failed"] == 0


@pytest.mark.parametrize("persistent", ["none", "the loop's", "both"])
def test_a_peek_at_the_job_inside_a_loop_with_workers_stops_that_loop(masters, persistent):
    """`next(iter(val_loader))` every few batches inside the loop over a loader with workers of
    the same dataset: the peek's batch comes at once (the loop's finish an ask of its worker
    carries does not hold it up, nor do the loop's workers, persistent or not, holding every
    task), the loop, resumed, raises `FailedPrecondition`, and nothing failed or was taken
    back: a new iteration trains the rest of the pass, every sample at least once (its pass's
    end stopping the peek's persistent workers, which hold tasks taken ahead)."""
    dataset = _dataset(masters, "first")
    train = dataset.loader(num_workers=2, persistent_workers=persistent != "none")
    val = dataset.loader(num_workers=2, persistent_workers=persistent == "both")
    seen = collections.Counter()
    with pytest.raises(raftrain.errors.FailedPrecondition, match="a newer one began in this process while it was suspended"):
        for index, batch in enumerate(train):
            seen.update(batch.tolist())
            if index == 3:
                assert len(next(iter(val))) == 5
    assert len(seen) == 20, "the loop consumed its four batches and no more"
    for batch in train:
        seen.update(batch.tolist())
    status = masters.status()
    assert sorted(seen) == list(range(40)) and train.pass_index == 0
    assert status["pass"] == 1 and status["failed"] == 0
    assert train.refused == val.refused == 0, "no task timed out"
    if persistent != "none":
        assert sorted(torch.cat(list(train)).tolist()) == list(range(40)), "new persistent workers for the next pass"


@pytest.mark.timeout(120)
def test_a_dataset_made_again_stops_the_old_ones_persistent_workers_holding_tasks(start_masters):
    """The first dataset's loop, with persistent workers, stops inside the pass (its workers
    holding tasks taken ahead); a second dataset of the job trains the pass at once, every
    sample, rather than waiting for those tasks' timeout (set past this test's)."""
    group = start_masters(extra_args=["--task-timeout-min-ms", "600000"])
    first = _dataset(group, "first").loader(num_workers=2, persistent_workers=True)
    for index, _batch in enumerate(first):
        if index == 1:
            break
    second = _dataset(group, "second").loader(num_workers=2)
    assert sorted(torch.cat(list(second)).tolist()) == list(range(40)), "every sample of the pass once"
    status = group.status()
    assert status["pass"] == 1 and status["failed"] == 0 and second.refused == 0
