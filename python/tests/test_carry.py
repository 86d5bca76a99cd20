"""The finish reports a training process hands its DataLoader workers to carry with their next
ask (`raftrain._torch_carry`): exactly one of the worker and the training process sends each,
a finish whose carrier failed or died is sent by the training process, and through real
masters the workers' asks carry a pass's finishes (one write per task instead of two), asked
several at once (one write for the round)."""

from __future__ import annotations

import multiprocessing
import os
import pickle

import pytest
import torch  # the test environment installs it: a missing torch fails, never skips

import raftrain._torch_loader
import raftrain._torch_walk
from raftrain._torch_carry import ANSWERED, Carriage, WorkerCarrier
from raftrain.task_client import StepKind
from raftrain.torch import REGISTRATIONS_PER_WORKER, TaskDataset

from cluster import entries_of_each

FORK = multiprocessing.get_context("fork")


def _claim_and_settle(carriage: Carriage, answers, results) -> None:
    """A worker's ask: claims the consumed finishes, and answers them with `answers`
    (`None`: the ask failed)."""
    carrier = WorkerCarrier(carriage, 0)
    claimed = carrier.claim()
    results.put(claimed)
    if answers is None:
        carrier.settle(claimed, None, RuntimeError("no leader"))
    else:
        carrier.settle(claimed, answers[: len(claimed)])


def _claim_and_die(carriage: Carriage, results) -> None:
    results.put(WorkerCarrier(carriage, 0).claim())
    results.close()
    results.join_thread()  # the claim is sent before the worker dies, its ask unanswered
    os._exit(0)


def _in_a_worker(target, *arguments):
    results = FORK.Queue()
    worker = FORK.Process(target=target, args=(*arguments, results))
    worker.start()
    claimed = results.get(timeout=30)
    worker.join(30)
    return claimed


def test_a_workers_ask_carries_the_consumed_finishes_and_answers_each():
    carriage = Carriage(1, FORK)
    assert carriage.consumed(0, 1, (10, 1)) and carriage.consumed(0, 2, (11, 1))
    assert _in_a_worker(_claim_and_settle, carriage, [True, False]) == [(10, 1), (11, 1)]
    assert not carriage.take_over(0, 1) and not carriage.take_over(0, 2), "the worker's ask took both"
    assert carriage.verdict(0, 1) is True and carriage.verdict(0, 2) is False


def test_a_finish_the_training_process_took_over_is_not_carried():
    carriage = Carriage(1, FORK)
    carriage.consumed(0, 1, (10, 1))
    assert carriage.take_over(0, 1)
    carriage.consumed(0, 2, (11, 1))
    assert _in_a_worker(_claim_and_settle, carriage, [True]) == [(11, 1)], "only the one not taken over"
    assert carriage.verdict(0, 2) is True


def test_a_finish_whose_ask_failed_or_whose_worker_died_is_the_training_processs_to_send():
    failed = Carriage(1, FORK)
    failed.consumed(0, 1, (10, 1))
    assert _in_a_worker(_claim_and_settle, failed, None) == [(10, 1)]
    assert not failed.take_over(0, 1) and failed.verdict(0, 1) is None
    died = Carriage(1, FORK)
    died.consumed(0, 1, (10, 1))
    assert _in_a_worker(_claim_and_die, died) == [(10, 1)]
    assert not died.take_over(0, 1) and died.verdict(0, 1) is None


def test_two_asks_at_once_carry_their_own_finishes_whichever_is_answered_first():
    """A worker asking for two tasks at once (`Registration.ask_ahead_together`): the first ask
    carries the consumed finishes before the second's own last finish, the second that one and
    after; the training process learns a verdict only once every earlier claim's is in."""
    carriage = Carriage(1, FORK)
    carrier = WorkerCarrier(carriage, 0)
    for number, receipt in ((1, (10, 1)), (2, (11, 1)), (3, (12, 1))):
        carriage.consumed(0, number, receipt)
    first = carrier.claim(leave=[(12, 1)])
    second = carrier.claim()
    assert (first, second) == ([(10, 1), (11, 1)], [(12, 1)])
    assert not carriage.take_over(0, 3), "the second ask carries it"
    carrier.settle(second, [True])
    assert carriage._get(0, ANSWERED) == 0, "the first ask is still under way"
    carrier.settle(first, [True, False])
    assert carriage._get(0, ANSWERED) == 3
    assert [carriage.verdict(0, number) for number in (1, 2, 3)] == [True, False, True]


def test_a_task_the_loop_did_not_consume_is_never_carried():
    """A stopped iteration's task (numbered, never consumed) is skipped by the next claim."""
    carriage = Carriage(1, FORK)
    carrier = WorkerCarrier(carriage, 0)
    assert [carrier.issue((10 + index, 1), 0.0) for index in range(3)] == [1, 2, 3]
    carriage.consumed(0, 1, (10, 1))
    carriage.consumed(0, 3, (12, 1))
    assert carrier.consumed_upto() == 3
    assert _in_a_worker(_claim_and_settle, carriage, [True, True]) == [(10, 1), (12, 1)]


def test_the_tasks_workers_took_are_held_until_the_loop_consumed_them():
    """What the training process reports the progress of: each task a worker took (in a
    worker process) and the loop has not consumed to the end, with when it was asked for."""
    carriage = Carriage(2, FORK)
    assert carriage.held() == []
    _in_a_worker(_take, carriage, 0, [((10, 1), 5.0), ((11, 2), 6.0), ((12, 1), 7.0)])
    _in_a_worker(_take, carriage, 1, [((20, 1), 8.0)])
    assert carriage.held() == [((10, 1), 5.0), ((11, 2), 6.0), ((12, 1), 7.0), ((20, 1), 8.0)]
    carriage.consumed(0, 2, (11, 2))
    carriage.consumed(1, 1, (20, 1))
    assert carriage.held() == [((12, 1), 7.0)], "the loop consumed those up to each one's last"


def _take(carriage: Carriage, worker: int, tasks, results) -> None:
    carrier = WorkerCarrier(carriage, worker)
    results.put([carrier.issue(receipt, asked_at) for receipt, asked_at in tasks])


def test_a_carriage_copied_other_than_to_a_starting_worker_is_off():
    carriage = Carriage(2, FORK)
    assert carriage.on and not pickle.loads(pickle.dumps(carriage)).on


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_the_workers_asks_carry_the_training_processs_finishes(masters, monkeypatch, start_method):
    """With DataLoader workers, the finish of each task the loop consumed travels with the next
    ask of the worker that read it (the training process sends none alone while its hold
    lasts, here longer than the pass, but a worker's last), every sample once, nothing refused."""
    monkeypatch.setattr(raftrain._torch_loader, "CARRY_HOLD_S", 30.0)
    rows = torch.arange(200)
    job = f"carried-{start_method}"
    passes = 4
    dataset = TaskDataset(masters.masters, index=(job, 200, 10), read=_Rows(rows), batch_size=5, passes=passes)
    loader = dataset.loader(num_workers=2, multiprocessing_context=start_method)
    assert sorted(torch.cat(list(loader)).tolist()) == list(range(200))
    entries = entries_of_each(masters, passes - 1, lambda: _every_row_once(loader, 200))
    # Each worker asks for several tasks at once (`WORKER_ASKS_TOGETHER`), which the masters
    # write as one entry (asked one at a time, the pass took 26).
    assert min(entries) < 20, f"{entries} entries for the 20 tasks of each pass"
    assert loader.job_finished and loader.finished == 20 * passes and loader.refused == 0
    # A worker whose walk ended (nothing was free for it) leaves the finishes of its tasks the
    # loop had not consumed yet (one a registration at most) to the training process, which
    # sends them before it reads whether the pass is over.
    assert passes * (20 - 2 * REGISTRATIONS_PER_WORKER) <= loader.carried <= 20 * passes, (loader.carried, loader.finished)
    assert loader.client.status()["dispatched"] == 20 * passes


def _every_row_once(loader, rows: int) -> None:
    assert sorted(torch.cat(list(loader)).tolist()) == list(range(rows))


def test_each_passs_new_workers_ask_for_the_pass_the_loader_walks(masters, monkeypatch):
    """A DataLoader's workers are new processes each pass: they ask for the pass the training
    process walks from their first ask on. Asked for pass 0, every first ask of theirs in a
    later pass was answered that the pass is over (a write for nothing, before any batch)."""
    stale = FORK.Value("i", 0)
    moved = raftrain._torch_walk.Walk._moved

    def counting(walk, step):
        if walk.loader is None and not walk.yielded and step.kind == StepKind.PassOver:
            # A worker's walk told the pass moved before it yielded a batch: in order, the
            # DataLoader takes each worker's first batch before the pass can end.
            with stale.get_lock():
                stale.value += 1
        return moved(walk, step)

    monkeypatch.setattr(raftrain._torch_walk.Walk, "_moved", counting)
    rows = torch.arange(200)
    dataset = TaskDataset(masters.masters, index=("hinted", 200, 10), read=_Rows(rows), batch_size=5, passes=3)
    loader = dataset.loader(num_workers=2, multiprocessing_context="fork")
    for pass_index in range(3):
        assert sorted(torch.cat(list(loader)).tolist()) == list(range(200))
        assert loader.pass_index == pass_index
    assert stale.value == 0, f"{stale.value} first asks of new workers were for a pass that was over"
    assert loader.job_finished


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def __call__(self, start, end):
        return self.rows[start:end]
