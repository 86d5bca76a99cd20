"""What keeps `TaskLoader`'s hand-offs off the training loop: its reports land in order and a
registration can wait for the ones queued before its ask; a loop that consumes each task
within a third of the task timeout sends progress reports only until it learned the timeout
(each is a replicated write); and `python -m raftrain.bench` prints the hand-off alone and
batched."""

from __future__ import annotations

import contextlib
import io
import re
import threading
import time

import pytest
import torch  # the test environment installs it: a missing torch fails, never skips

import raftrain
import raftrain._torch_loader
import raftrain.task_client
from raftrain import bench
from raftrain._bench_ddp import bench_ddp
from raftrain._torch_io import Reports
from raftrain.torch import REGISTRATIONS_OF_THE_LOOP, TaskDataset

from cluster import binary, entries_of_each


def test_reports_land_in_order_and_landed_waits_for_those_queued_before():
    gates = {receipt: threading.Event() for receipt in [(1, 1), (2, 1), (3, 1)]}
    sent = []

    def send(kind, receipt, carry=None):
        gates[receipt].wait(10)
        sent.append((kind, receipt))

    reports = Reports(send, unclaimed)
    for receipt in gates:
        reports.put(("finish", receipt))
    assert reports.queued == 3
    gates[(1, 1)].set()
    assert reports.landed(1) >= 1, "the first report's answer is waited for alone"
    gates[(2, 1)].set()
    gates[(3, 1)].set()
    assert reports.landed() == 3
    reports.flush()
    assert sent == [("finish", (1, 1)), ("finish", (2, 1)), ("finish", (3, 1))]


def test_a_failed_report_is_raised_in_the_loop_and_still_counts_as_landed():
    def send(kind, receipt, carry=None):
        raise RuntimeError(f"no master took {kind} {receipt}")

    reports = Reports(send, unclaimed)
    reports.put(("finish", (7, 2)))
    assert reports.landed() == 1, "a failure does not leave an ask waiting"
    try:
        reports.flush()
    except RuntimeError as error:
        assert "finish (7, 2)" in str(error)
    else:
        raise AssertionError("the failed report was not raised")


def test_a_progress_report_is_unanswered_while_queued_or_sent_and_not_after_one_skipped():
    """`progress_unanswered` (the loader sends one progress report at a time until it learned
    the task timeout): true while one waits or is being sent; false once it was answered, and
    once it was skipped because an earlier report failed (never sent, so never answered: it
    must not keep the next from being asked)."""
    gate, failing = threading.Event(), []

    def send(kind, receipt, carry=None):
        if failing:
            raise RuntimeError("no master")
        gate.wait(10)

    reports = Reports(send, unclaimed)
    assert not reports.progress_unanswered()
    reports.put(("progress", (1, 1)))
    assert reports.progress_unanswered()
    gate.set()
    reports.flush()
    assert not reports.progress_unanswered()
    failing.append(True)
    reports.put(("finish", (2, 1)))
    reports.put(("progress", (3, 1)))
    assert reports.landed() == 3
    assert not reports.progress_unanswered(), "the skipped progress report is not waited for"


def unclaimed(task_id, dispatch, accepted):
    raise AssertionError(f"no ask claimed {(task_id, dispatch)}")


def test_an_ask_carries_the_held_finishes_and_a_flush_sends_the_rest_at_once():
    """Finishes wait (held) for an ask to claim them, in order and never a progress report; the
    claim's answers go to the loader, its failure to the loop; a flush sends what is held."""
    sent, answered = [], []
    reports = Reports(lambda kind, receipt, carry=None: sent.append((kind, receipt)), lambda *answer: answered.append(answer), hold_s=600)
    reports.put(("progress", (2, 1)))
    reports.put(("finish", (1, 1)))
    reports.put(("finish", (3, 1)))
    claimed = reports.claim()
    assert claimed == [(1, 1), (3, 1)]
    assert reports.landed() == 1, "the progress report went; the claimed finishes are the ask's"
    reports.settle(claimed, [True, False])
    assert answered == [(1, 1, True), (3, 1, False)]
    reports.put(("finish", (4, 1)))
    failed = reports.claim()
    reports.settle(failed, None, RuntimeError("the ask failed"))
    with pytest.raises(RuntimeError, match="the ask failed"):
        reports.flush()
    reports.put(("finish", (5, 1)))
    reports.flush()
    assert sent == [("progress", (2, 1)), ("finish", (5, 1))], "held, then sent by the flush"


def test_a_progress_report_sends_the_finishes_held_before_it_at_once():
    """A progress report means a task's deadline is near: it does not wait behind a finish held
    for an ask (the hold is ten minutes here), and it goes after it, in order."""
    sent, progressed = [], threading.Event()

    def send(kind, receipt, carry=None):
        sent.append((kind, receipt))
        if kind == "progress":
            progressed.set()

    reports = Reports(send, unclaimed, hold_s=600)
    reports.put(("finish", (1, 1)))
    reports.put(("progress", (2, 1)))
    assert progressed.wait(10), "the progress report waited for the held finish's hold"
    assert sent == [("finish", (1, 1)), ("progress", (2, 1))]
    assert reports.claim() == []


def test_a_held_finish_no_ask_claims_is_sent_once_its_hold_ran_out():
    sent = threading.Event()
    reports = Reports(lambda kind, receipt, carry=None: sent.set(), unclaimed, hold_s=0.05)
    reports.put(("finish", (1, 1)))
    assert sent.wait(10), "sent by the reporting thread after its hold"
    assert reports.claim() == []


def test_a_held_finish_goes_once_the_hold_is_shortened():
    """A finish held for a long hold is sent as soon as the hold is cut below its age (the
    loader learned a task timeout shorter than the hold)."""
    sent = threading.Event()
    reports = Reports(lambda kind, receipt, carry=None: sent.set(), unclaimed, hold_s=30.0)
    reports.put(("finish", (1, 1)))
    assert not sent.wait(0.2), "held"
    reports.hold_at_most(0.05)
    assert sent.wait(10), "sent once the shorter hold ran out, not after the 30 s one"


@pytest.mark.parametrize("workers", [0, 2])
def test_a_short_task_timeout_shortens_the_finishes_hold(masters, workers):
    """A job whose tasks time out after 1.2 s: once the first progress report answers that
    timeout, a finish is held at most a sixth of it for an ask to carry (the holds, 0.25 s and
    1 s, would otherwise let a held finish reach the masters after its task's deadline), and
    every sample is trained once, nothing taken back."""
    read = _Arange()
    policy = {"task_timeout_min_ms": 1200}
    dataset = TaskDataset(masters.masters, index=(f"short-timeout-{workers}", 80, 4), read=read, passes=1, batch_size=2, policy=policy)
    loader = dataset.loader(num_workers=workers)
    seen = [value for batch in loader for value in batch.tolist()]
    assert sorted(seen) == list(range(80))
    assert loader.refused == 0
    timeout = loader._task_timeout_s
    assert timeout is not None and timeout < 2, timeout
    assert loader._reports._hold_s == pytest.approx(timeout * raftrain._torch_loader.HOLD_TIMEOUT_SHARE)


class _Arange:
    """`read(start, end)` of the indices themselves (a class: spawned workers get it)."""

    def __call__(self, start: int, end: int):
        return torch.arange(start, end)


def test_a_loader_without_workers_asks_for_eight_tasks_at_once(masters):
    """Without workers, once its tasks' finishes are in, the loader's registrations ask for
    the next tasks all at once, which the masters write as one entry: a pass of 80 tasks takes
    about one entry per eight tasks (asked two at a time it took over 40), every sample comes
    once and in the pass's order (asks applied in any order, some at the pass's end finding
    nothing free), nothing is refused."""
    passes = 4
    dataset = TaskDataset(masters.masters, index=("eight-at-once", 400, 5), read=_Arange(), batch_size=5, passes=passes)
    loader = dataset.loader(num_workers=0)
    assert [value for batch in loader for value in batch.tolist()] == list(range(400))
    entries = entries_of_each(masters, passes - 1, lambda: _in_order_once(loader, 400))
    assert min(entries) < 30, f"{entries} entries for the 80 tasks of each pass"
    assert loader.job_finished and (loader.finished, loader.refused) == (80 * passes, 0)


def _in_order_once(loader, rows: int) -> None:
    assert [value for batch in loader for value in batch.tolist()] == list(range(rows))


def test_reports_slow_to_land_still_let_the_loop_ask_its_tasks_eight_at_once(masters, monkeypatch):
    """Each finish sent by the reporting thread at once (no hold) and slow to land (20 ms, as
    on masters writing to a busy disk): a round's asks must not overtake the finish under way
    (the master would answer its task again), so at a task's last batch the loader waits for
    it, and asks the round then, rather than taking its next task in a call of its own, and
    every task after it too."""
    monkeypatch.setattr(raftrain._torch_loader, "FINISH_HOLD_S", 0.0)
    send_report = raftrain._torch_loader.TaskLoader._send_report

    def slow(loader, kind, receipt, carry=None):
        time.sleep(0.02)
        return send_report(loader, kind, receipt, carry)

    monkeypatch.setattr(raftrain._torch_loader.TaskLoader, "_send_report", slow)
    counts = []
    step_ahead = raftrain.TaskClient.step_ahead

    def counted(client, finished=(), together=1):
        counts.append(together.count if isinstance(together, raftrain.task_client.AskGather) else together)
        return step_ahead(client, finished, together)

    monkeypatch.setattr(raftrain.TaskClient, "step_ahead", counted)
    dataset = TaskDataset(masters.masters, index=("slow-reports", 400, 10), read=_Arange(), batch_size=5)
    loader = dataset.loader(num_workers=0)
    assert [value for batch in loader for value in batch.tolist()] == list(range(400))
    assert loader.job_finished and (loader.finished, loader.refused) == (40, 0)
    asked_at_once = REGISTRATIONS_OF_THE_LOOP - 1
    assert counts.count(asked_at_once) >= 2 * asked_at_once, f"asks ahead, each with how many were sent together: {counts}"


def test_a_fast_loop_reports_progress_only_until_it_learned_the_task_timeout(masters):
    """20 tasks of 4 samples, 2 batches each, consumed in far less than a third of the 20 s
    timeout: the first task reports its progress (that answer tells the loader the timeout),
    and no other (while it is unanswered, the tasks taken meanwhile wait for it rather than
    each asking too); every task is finished once, none taken back."""
    read = lambda start, end: torch.arange(start, end)
    dataset = TaskDataset(masters.masters, index=("quick", 80, 4), read=read, passes=1, batch_size=2)
    loader = dataset.loader(num_workers=0)
    seen = []
    for batch in loader:
        seen.extend(batch.tolist())
    status = masters.status()
    assert sorted(seen) == list(range(80))
    assert (loader.finished, loader.refused) == (20, 0)
    assert loader.progressed == 1, loader.progressed
    assert status["job_finished"] and status["dispatched"] == 20


def test_the_hand_off_benchmark_prints_one_client_and_clients_at_once(tmp_path):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        bench.bench_hand_off(binary(), tmp_path, 24, 4)
    rows = [line for line in printed.getvalue().splitlines() if line.startswith("| ") and "ms" not in line and "---" not in line]
    assert [row.split(" | ")[0] for row in rows] == ["| one TaskClient", "| 4 TaskClients at once (writes share Raft entries)"], printed.getvalue()
    for row in rows:
        p50, p99 = (float(cell) for cell in row.strip(" |").split(" | ")[1:])
        assert 0 < p50 <= p99


def test_the_loader_benchmark_prints_each_row_from_several_passes(tmp_path):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        # Tasks of 512: batches of 512 fit them (no warning).
        bench.bench_torch(binary(), tmp_path, 2_000, 512, passes=2)
    rows = [line for line in printed.getvalue().splitlines() if line.startswith("| ") and line[2].isdigit()]
    shapes = [row.split("|")[1:4] for row in rows]
    assert shapes == [[" 0 ", " 64 ", " 512 "], [" 0 ", " 512 ", " 512 "], [" 2 ", " 64 ", " 512 "], [" 2 ", " 512 ", " 512 "], [" 2 ", " 512 ", " 1024 "]], printed.getvalue()
    cells = [[cell.strip() for cell in row.strip(" |").split("|")] for row in rows]
    # The two ratios (the pass ratio to three places: two round across the goal, 0.95x), then the
    # masters' CPU beside each loader (read from /proc on Linux), then the milliseconds each loop
    # waited for its batches, then the ratio by the order the pairs ran in (of two passes, the
    # second ran the TaskLoader first).
    assert all(re.fullmatch(r"\d+\.\d{3}x", row[5]) and re.fullmatch(r"\d+\.\d\dx", row[6]) for row in cells), printed.getvalue()
    assert all(re.fullmatch(r"\d+\.\d\d / \d+\.\d\d", row[7]) for row in cells), printed.getvalue()
    assert all(re.fullmatch(r"\d+\.\d / \d+\.\d", row[8]) and float(row[8].split(" / ")[1]) > 0 for row in cells), printed.getvalue()
    assert all(re.fullmatch(r"- / \d+\.\d{3}x", row[9]) for row in cells), printed.getvalue()


def test_the_ddp_benchmark_prints_a_row_for_each_task_size(tmp_path):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        bench_ddp(binary(), tmp_path, 2_000, 400, passes=2)
    rows = [line for line in printed.getvalue().splitlines() if line.startswith("| ") and line[2].isdigit()]
    cells = [[cell.strip() for cell in row.strip(" |").split("|")] for row in rows]
    assert [row[:3] for row in cells] == [["2", "400", "5"], ["2", "800", "3"]], printed.getvalue()
    assert all(float(row[3]) > 0 and float(row[4]) > 0 and row[5].endswith("x") for row in cells), printed.getvalue()


class _Walks:
    """A stand-in for a loader's items (`TaskLoader._items`): each call (a walk of the dataset)
    yields the next of `walks`' batches."""

    def __init__(self, walks):
        self.walks = iter(walks)

    def __call__(self):
        return iter([(batch, [], (1, 1), 0.0, None, 0) for batch in next(self.walks)])


def test_a_loader_pauses_longer_before_each_walk_again_that_found_nothing_free(monkeypatch):
    """Tasks are back in the queue but no walk of this process gets one (a restore holds the
    queue until the job's pservers reloaded; another process took them): a walk ends as soon
    as nothing is free, so the loader pauses before the next, longer each time, rather than
    asking the masters in a loop; a walk that yields a batch starts the pauses over."""
    dataset = TaskDataset("127.0.0.1:9", index=("walks", 10, 5), read=lambda start, end: torch.arange(start, end), batch_size=5)
    loader = dataset.loader()
    monkeypatch.setattr(loader, "_items", _Walks([[], [], [], ["batch"], []]))
    overs = iter([False, False, False, False, True])
    monkeypatch.setattr(loader, "_job_status", lambda: {"ended": False, "pass": 0})
    monkeypatch.setattr(loader, "_consuming", lambda holding, dispatched_at: None)
    monkeypatch.setattr(loader, "_wait_for_pass_end", lambda pass_index: {"over": next(overs), "ended": False, "pass": 1})
    pauses = []
    monkeypatch.setattr(raftrain._torch_loader.time, "sleep", pauses.append)
    assert list(loader) == ["batch"]
    minimum = raftrain._torch_loader.REWALK_PAUSE_S_MIN
    assert pauses == [minimum, 2 * minimum, 4 * minimum], pauses


def test_the_loader_iterating_a_dataset_carries_its_finishes_though_another_was_made_since(masters):
    """Two loaders of one dataset in one process (one made later for another look, say): the
    one iterating is the one whose finishes its asks carry, a task hand-off in one write, not
    each finish sent alone once its hold ran out while every ask is answered the task whose
    finish it waits for (a pass 20 times slower)."""
    read = lambda start, end: torch.arange(start, end)
    dataset = TaskDataset(masters.masters, index=("twice", 40, 4), read=read, passes=1, batch_size=2)
    first = dataset.loader(num_workers=0)
    dataset.loader(num_workers=0)  # made, never iterated
    sent_alone = []
    send = first._send_report
    first._send_report = lambda kind, receipt, carry=None: (sent_alone.append(kind), send(kind, receipt, carry))
    assert sorted(each for batch in first for each in batch.tolist()) == list(range(40))
    assert (first.finished, first.refused) == (10, 0)
    assert sent_alone.count("finish") <= 1, sent_alone
