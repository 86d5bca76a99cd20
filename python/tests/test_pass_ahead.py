"""A loader without workers asks for the next pass's first task as it sees a pass end
(`raftrain._torch_pass_ahead.PassAhead`): the next iteration's first batch waits for no write,
and a loop away longer than the hold gives the task back, counting no failure. Against real
masters."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch  # the test environment installs it: a missing torch fails, never skips

import raftrain
import raftrain._torch_loader
import raftrain._torch_pass_ahead
import raftrain._torch_walk
from raftrain.torch import TaskDataset


def _arange(start: int, end: int):
    return torch.arange(start, end)


def _pass(loader, steps: list, asks: list) -> tuple:
    """One iteration's samples, how many blocking steps its first `next()` made, and how many
    asks (blocking or ahead) its last `next()` made, the one that saw the pass end."""
    each = iter(loader)
    before = len(steps)
    first = next(each)
    at_start = len(steps) - before
    seen = first.tolist()
    while True:
        before_end = len(steps) + len(asks)
        batch = next(each, None)
        if batch is None:
            return seen, at_start, len(steps) + len(asks) - before_end
        seen += batch.tolist()


def test_back_to_back_passes_start_with_the_task_asked_as_the_last_pass_ended(masters, monkeypatch):
    """Four passes of 20 tasks iterated back to back: from the second on (the task timeout,
    which bounds the hold, is learned in the first), the ask that carries a pass's last finish
    asks for the next pass (one ask, not one answered "pass over" and then another), and from
    the third on each iteration's first batch comes from the task it was handed, with no step of
    its own; each pass trains every sample once, nothing is given back or handed out twice."""
    monkeypatch.setattr(raftrain._torch_loader, "PASS_AHEAD_HOLD_S", 30.0)
    steps: list = []
    asks: list = []
    step, step_ahead = raftrain.TaskClient.step, raftrain.TaskClient.step_ahead

    def counted(client, finished=()):
        steps.append(client)
        return step(client, finished)

    def counted_ahead(client, finished=(), together=1):
        asks.append(client)
        return step_ahead(client, finished, together)

    monkeypatch.setattr(raftrain.TaskClient, "step", counted)
    monkeypatch.setattr(raftrain.TaskClient, "step_ahead", counted_ahead)
    passes, size = 4, 80
    dataset = TaskDataset(masters.masters, index=("pass-ahead", size, 4), read=_arange, batch_size=2, passes=passes)
    loader = dataset.loader(num_workers=0)
    starts, ends = [], []
    for _ in range(passes):
        seen, at_start, at_end = _pass(loader, steps, asks)
        assert sorted(seen) == list(range(size))
        starts.append(at_start)
        ends.append(at_end)
    assert starts[2:] == [0, 0], f"blocking steps at each pass's first batch: {starts}"
    assert ends[1:] == [1, 1, 1], f"asks in each pass's last next(): {ends}"
    assert loader.job_finished and (loader.finished, loader.refused) == (20 * passes, 0)
    assert dataset._pass_ahead.given_back == 0
    assert masters.status()["dispatched"] == 20 * passes, "no task handed out twice"


@pytest.mark.parametrize("giver_idle_s", [60.0, 0.5])
def test_a_loop_away_between_passes_longer_than_the_task_timeout_gives_the_task_back(masters, monkeypatch, giver_idle_s):
    """Tasks time out after 1.2 s and the loop is away 1.5 s between passes (an evaluation):
    the task asked for the next pass goes back to the queue a sixth of the timeout after the
    pass ended (its registration leaves the job, another registers in its place), instead of
    timing out, which would count a failure against it and refuse its finish; each pass
    trains every sample once. One thread gives the tasks back, for every pass, or a new one
    each time where the last ended, idle (`giver_idle_s` 0.5)."""
    monkeypatch.setattr(raftrain._torch_pass_ahead, "GIVER_IDLE_S", giver_idle_s)
    passes, size = 3, 40
    policy = {"task_timeout_min_ms": 1200}
    dataset = TaskDataset(masters.masters, index=(f"pass-ahead-away-{int(giver_idle_s * 10)}", size, 4), read=_arange, batch_size=2, passes=passes, policy=policy)
    loader = dataset.loader(num_workers=0)
    givers: set = set()
    for index in range(passes):
        assert sorted(value for batch in loader for value in batch.tolist()) == list(range(size))
        assert loader.pass_index == index
        givers.add(dataset._pass_ahead._giver)
        time.sleep(1.5)
    assert loader.job_finished and (loader.finished, loader.refused) == (10 * passes, 0)
    given_back = dataset._pass_ahead.given_back
    assert given_back == passes - 1, given_back
    if giver_idle_s > 1.5:
        (giver,) = givers
        assert giver.is_alive() and giver.name == "raftrain-pass-ahead", givers
    else:
        # (None: the last pass asked nothing ahead, the job finished.)
        assert len(givers - {None}) == passes - 1 and dataset._pass_ahead._giver is None, givers
    status = masters.status()
    assert status["dispatched"] == 10 * passes + given_back, "only the tasks given back were handed out twice"
    assert status["failed"] == 0


def test_a_restore_between_passes_gives_the_task_asked_ahead_back_first(masters, monkeypatch):
    """`load_state_dict` right after a pass ended, with the next pass's first task asked for:
    that task goes back before the restore, and the pass restored comes whole, every sample
    once, nothing refused."""
    monkeypatch.setattr(raftrain._torch_loader, "PASS_AHEAD_HOLD_S", 30.0)
    size = 40
    dataset = TaskDataset(masters.masters, index=("pass-ahead-restore", size, 4), read=_arange, batch_size=2, passes=3)
    loader = dataset.loader(num_workers=0)
    state = loader.state_dict()
    for _ in range(2):
        assert sorted(value for batch in loader for value in batch.tolist()) == list(range(size))
    loader.load_state_dict(state)
    assert dataset._pass_ahead.given_back == 1
    assert loader.pass_index == 0
    assert sorted(value for batch in loader for value in batch.tolist()) == list(range(size))
    assert loader.refused == 0


class _AskingRegistration:
    """A registration whose asks ahead are answered nothing to give back (no masters)."""

    def ask_ahead(self) -> bool:
        return True

    def answer_ahead(self):
        return None


def test_the_giving_thread_lasts_while_passes_ask_and_ends_once_idle(monkeypatch):
    """Passes that end every 0.1 s for 2 s, each claiming its step at once, keep one giving
    thread though it ends 1 s after a hold ran out with nothing held; once they stop, it ends."""
    monkeypatch.setattr(raftrain._torch_pass_ahead, "GIVER_IDLE_S", 1.0)
    ahead = raftrain._torch_pass_ahead.PassAhead()
    givers = set()
    for _ in range(20):
        ahead.ask(_AskingRegistration(), 0.05, lambda suffix: None)
        givers.add(ahead._giver)
        ahead.claim()
        time.sleep(0.1)
    (giver,) = givers
    giver.join(timeout=5)
    assert not giver.is_alive() and ahead._giver is None and ahead.asked == 20


class _FailingRegistration(_AskingRegistration):
    """A registration whose answer cannot be read (a bug's exception, not a raftrain error)."""

    def answer_ahead(self):
        raise RuntimeError("planted")


def test_a_give_back_that_raises_leaves_the_thread_giving_back_later_passes(caplog):
    """An unexpected exception while a task is given back is logged, and the same thread gives
    back the next pass's step."""
    ahead = raftrain._torch_pass_ahead.PassAhead()
    ahead.ask(_FailingRegistration(), 0.01, lambda suffix: None)
    giver = ahead._giver
    deadline = time.monotonic() + 5
    while "planted" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.01)
    assert "not given back" in caplog.text and giver.is_alive()
    ahead.ask(_AskingRegistration(), 0.01, lambda suffix: None)
    while ahead._held is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ahead._held is None and ahead._giver is giver and giver.is_alive()


def test_a_forked_process_makes_its_own_pass_ahead():
    """A process forked while the parent's giving thread holds the lock (a give-back under way)
    asks ahead with its own `PassAhead`, not the copy whose lock nobody will release."""
    dataset = TaskDataset(["127.0.0.1:1"], index=("pass-ahead-fork", 8, 4), read=_arange, batch_size=2)
    parent = dataset._next_pass_ask()
    with parent.lock:
        pid = os.fork()
        if pid == 0:  # the child: exits 0 only if its PassAhead is its own and usable
            ahead = dataset._next_pass_ask()
            usable = ahead is not parent and ahead.lock.acquire(timeout=5)
            os._exit(0 if usable else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert dataset._next_pass_ask() is parent


def test_a_pass_whose_last_task_another_trainer_holds_ends_once_that_one_is_reported(masters, monkeypatch):
    """Another trainer holds one of pass 1's ten tasks while the loader consumes the rest (pass
    0 trained first, so the loader knows the task timeout): the ask that carries the loader's
    last finish, made for the next pass (`Walk._ask_past_pass_end`), is answered that the job
    is still at pass 1, which the walk takes as "held elsewhere"; the iteration waits for the
    pass's end (the other trainer's finish) and yields nothing of pass 2 meanwhile; the next
    iteration trains pass 2 whole, and its last ask is answered that the job finished."""
    monkeypatch.setattr(raftrain._torch_loader, "PASS_AHEAD_HOLD_S", 30.0)
    answers: list = []
    ask = raftrain._torch_walk.Walk._ask_past_pass_end

    def recorded(walk, registration, reports):
        step = ask(walk, registration, reports)
        answers.append((walk.pass_index, step.kind, step.waiting_for))
        return step

    monkeypatch.setattr(raftrain._torch_walk.Walk, "_ask_past_pass_end", recorded)
    size = 40
    dataset = TaskDataset(masters.masters, index=("pass-ahead-held", size, 4), read=_arange, batch_size=2, passes=3)
    loader = dataset.loader(num_workers=0)
    assert sorted(value for batch in loader for value in batch.tolist()) == list(range(size))
    other = raftrain.TaskClient(masters.masters, name="other", job="pass-ahead-held")
    step = other.step()
    while step.kind != raftrain.StepKind.Task:
        step = other.step()
    held = step.task
    assert held.pass_index == 1
    answers.clear()
    seen: list = []
    iterating = threading.Thread(target=lambda: seen.extend(value for batch in loader for value in batch.tolist()))
    iterating.start()
    deadline = time.monotonic() + 30
    while not answers and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    assert iterating.is_alive(), "the iteration ended before the pass did"
    assert answers == [(1, raftrain.StepKind.Wait, raftrain.Waiting.HELD_ELSEWHERE)]
    assert other.step(finished=[held]).finished == (True,)
    iterating.join(30)
    assert sorted(seen) == sorted(set(range(size)) - set(range(held.start, held.end)))
    assert loader.pass_index == 1
    assert sorted(value for batch in loader for value in batch.tolist()) == list(range(size))
    assert loader.pass_index == 2 and loader.job_finished
    finished = [(2, raftrain.StepKind.Finished, None)]
    assert answers[1:] == finished, "the last pass's last ask is answered that the job finished"
    assert (loader.finished, loader.refused) == (29, 0)
    other.close()
