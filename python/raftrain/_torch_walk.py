"""`Walk`: one iteration of a `TaskDataset` in one process (the training process itself without
DataLoader workers, or one worker): its registrations' steps through one pass of the job, and
the batches of the tasks they take. `raftrain.torch` documents how the steps go."""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING, Iterator, List, Optional, Tuple

from ._torch_carry import WorkerCarrier
from ._torch_io import Finishes, Receipt, Registration
from .errors import FailedPrecondition
from .task import Task
from .task_client import Step, StepKind, Waiting

if TYPE_CHECKING:
    from ._torch_loader import TaskLoader
    from .torch import TaskDataset

#: Between asks while a walk's registrations are answered their own tasks (their finishes not
#: in yet), or the job has no dataset yet: the first pause, doubled after each fruitless round
#: up to the longest (each round is a replicated write per registration; a finish usually
#: lands within the first pauses).
HELD_POLL_S_MIN = 0.005
HELD_POLL_S = 0.05
#: A walk in the training process ends once its registrations have been answered only their
#: own tasks (whose finishes are on their way) for this long. A walk ends at once when the
#: pass's other tasks are held elsewhere (see `Walk._idle_over`).
PASS_END_IDLE_S = 1.0
#: Between looks of a worker at its training process's progress while each of its
#: registrations holds a task the training loop has not consumed yet (shared memory, no ask):
#: the first pause, doubled up to the longest while the loop consumes nothing.
CONSUMED_POLL_S_MIN = 0.001
CONSUMED_POLL_S = 0.02

#: The most tasks a DataLoader worker asks for at once (`Walk._ask_round`): the masters write
#: them as one entry, and with two workers the masters' CPU is the training's (the training
#: process and two workers keep both of this machine's cores busy). Up to four instead of two:
#: 18 entries a pass of 50 tasks instead of 29 (two workers, batch 512), about a hundredth of
#: the benchmark's ratio in alternated runs that each move by about two (BENCHMARKS.md). A
#: worker has twice as many registrations (`REGISTRATIONS_PER_WORKER`).
WORKER_ASKS_TOGETHER = 4

Steps = List[Tuple[Registration, Step]]
#: What a walk yields for each batch (a `TaskDataset`'s items): the batch, the receipts of the
#: tasks it is the last batch of, the task it is of, when that task was asked for, the worker's
#: carry (or `None`) and the task's pass.
Item = Tuple[object, List[Receipt], Receipt, float, Optional[Tuple[int, int]], int]


def stale_iteration(job: str) -> FailedPrecondition:
    """The error of an iteration of job `job` resumed after a newer one began in this process."""
    return FailedPrecondition(
        f"this iteration of job {job!r} cannot go on: a newer one began in this process while it was suspended (an "
        "iterator not run to its end); iterate one loader of a job at a time in a thread, and validate on a TaskDataset "
        "of another job",
        "FAILED_PRECONDITION",
    )


class Walk:
    """One pass as this process sees it: tasks until the pass is over after it yielded some,
    or until nothing is free (the rest are held elsewhere), or the job finished. Each
    registration walks the passes with the client's walker; when one learns the pass moved,
    the others are moved with it. `loader`: the `TaskLoader` iterating in this
    process (`None` in a DataLoader worker)."""

    def __init__(self, dataset: "TaskDataset", registrations: List[Registration], loader: Optional["TaskLoader"]):
        self.dataset = dataset
        self.registrations = registrations
        self.loader = loader
        # A worker's asks carry the finishes its training process consumed of its tasks.
        self.carrier = dataset._carrier if loader is None else None
        self.pass_index = registrations[0].client.pass_index
        self.yielded = False
        self.idle_since: Optional[float] = None
        # How many reports had landed when a registration was last answered this process's
        # own unreported task.
        self.landed = -1
        self.pause, self.unconsumed_pause = HELD_POLL_S_MIN, CONSUMED_POLL_S_MIN
        # The registration whose task the loop is consuming (or consumed last).
        self.current: Optional[Registration] = None
        # (The training process.) The registrations asked at once with `current` whose answers
        # come after its task in the pass's order, worked out once for them all (`_ready_step`).
        self.ready: List[Registration] = []
        # (The training process.) The registration whose ask ended the pass and was handed the
        # next pass's task, held for the next iteration (`_ask_past_pass_end`).
        self.passed_on: Optional[Registration] = None
        # Whether an answer of the pass walked said its other tasks are held elsewhere.
        self.drained = False
        # Which of the dataset's walks in the training process this is: a newer one walks the
        # same registrations (`raise_if_stale`).
        if loader is not None:
            dataset._walks_begun += 1
        self.number = dataset._walks_begun

    def batches(self) -> Iterator[Item]:
        """The pass's batches of the tasks this process's registrations take (the dataset's
        items)."""
        while True:
            self.raise_if_stale()
            steps = self._steps()
            if not steps:
                # Every registration holds a task the loop has not consumed yet.
                time.sleep(self.unconsumed_pause)
                self.unconsumed_pause = min(self.unconsumed_pause * 2, CONSUMED_POLL_S)
                continue
            registration, step = steps[-1]
            if step.kind in (StepKind.Finished, StepKind.Cancelled):
                # The job ended: this process's registrations stop heartbeating now, rather
                # than warning every lease once the masters are gone.
                self.dataset._unregister(self.registrations)
                return
            if step.kind in (StepKind.PassOver, StepKind.PassRewound):
                if self._moved(step):
                    return
                continue
            if step.task is not None and not registration.holds(step):
                yield from self._task(registration, step.task)
                continue
            if self._own_reports_landed(steps):
                continue
            if self._idle_over(steps):
                return

    def raise_if_stale(self) -> None:
        """Raises `FailedPrecondition` once a newer walk of the dataset began in the training
        process while this one was suspended (an iterator of a loader not run to its end, as
        `next(iter(val_loader))` inside the training loop over the same job): that walk asks
        with the same registrations now, and this one would take its answers. So does a walk
        of another dataset of the job, which took the job over (`_torch_takeover`)."""
        if self.number != self.dataset._walks_begun:
            raise stale_iteration(self.dataset.job_name())

    def _steps(self) -> Steps:
        """The next steps: registrations whose next step was asked ahead answer first, in the
        order asked, and the others ask until one is handed a task it did not hold, the pass
        moved or ended, or (in a worker) nothing is free."""
        reports: Optional[Finishes] = self.loader._reports if self.loader is not None else self.carrier
        if self.carrier is not None:
            self._ask_round()
        elif self.ready:
            ready = self._ready_step(reports)
            if ready is not None:
                return [ready]
        steps: Steps = []
        ordered = Registration.in_pass_order(sorted(self.registrations, key=Registration.ask_order, reverse=True))
        for index, registration in enumerate(ordered):
            if self._unconsumed(registration):
                # The master would answer its task again (a write): ask once it is consumed.
                continue
            asked_now = not registration.asked_ahead()
            if asked_now and self._may_end_pass(registration):
                step = self._ask_past_pass_end(registration, reports)
            else:
                step = registration.step(reports)
            if step.kind == StepKind.Wait and step.waiting_for == Waiting.HELD_ELSEWHERE:
                self.drained = True
            steps.append((registration, step))
            if step.kind != StepKind.Wait and not registration.holds(step):
                if self.loader is not None:
                    self.ready = list(itertools.takewhile(lambda each: each.asked_at_once_with(registration), ordered[index + 1 :]))
                break
            if step.kind == StepKind.Wait and (asked_now if self.loader is not None else not self._asked_ahead()):
                # Nothing is free for the job, so another registration's ask (a write) would be
                # answered alike: in the training process once an ask made now (it carried the
                # finishes not sent yet; the answers asked ahead, which come first, may be
                # older), in a worker once no answer asked ahead is left. But for one that
                # forgot a task the loop stopped inside: it is answered that task.
                if not any(later.forgot() for later in ordered[index + 1 :]):
                    break
        return steps

    def _ready_step(self, reports: Optional[Finishes]) -> Optional[Tuple[Registration, Step]]:
        """(The training process.) The next of `ready` and its task, taken, when its answer is
        a task it did not hold, as `_steps` would take it (the pass's order of the steps asked
        at once is worked out once for them all); else `None` and `ready` dropped, for
        `_steps` to ask as usual."""
        registration = self.ready.pop(0)
        step = None if self.current is None else registration.answered_with(self.current)
        if step is None or step.kind != StepKind.Task or registration.holds(step):
            self.ready = []
            return None
        return registration, registration.step(reports)

    def _may_end_pass(self, registration: Registration) -> bool:
        """(The training process.) Whether the ask `registration` is about to make probably ends
        the pass: the iteration yielded batches, an answer of this pass said its other tasks
        are held elsewhere (`drained`; none here: the loop consumed the last task this process
        took, whose finish the ask carries, and no other registration holds one), the
        registration did not forget a task the loop stopped inside (the masters answer it that
        task), and the loader would hold a next pass's task (`TaskLoader.pass_ahead_hold_s`)."""
        loader = self.loader
        if loader is None or not self.yielded or not self.drained or registration.forgot():
            return False
        return loader.pass_ahead_hold_s() is not None

    def _ask_past_pass_end(self, registration: Registration, reports: Optional[Finishes]) -> Step:
        """(The training process.) `registration` asks for a task of the next pass, carrying the
        finishes not sent yet: where they end the pass, the masters hand it the next pass's
        first task in the same write, and the walk sees the pass over (a "pass over" step) with
        that task held for the next iteration (`PassAhead`), rather than asking for it after
        an answer "pass over" (a second write, which the next iteration's first batch waited
        for). Where they do not (another process holds one of the pass's tasks), the answer is
        that the job is still at the pass: the walk goes back to it, and takes that as an
        answer that the pass's other tasks are held elsewhere (the loader then waits for the
        pass's end, and walks again for any task that comes back)."""
        ending = self.pass_index
        registration.go_to(ending + 1)
        registration.ask_ahead(reports)
        # The finishes it carried are answered now (counted before the iteration ends); the
        # step stays asked ahead, for the next iteration to take.
        registration.settle_ahead()
        step = registration.answer_ahead()
        if step is not None and step.task is not None and step.task.pass_index == ending + 1:
            self.passed_on = registration
            return Step(StepKind.PassOver, None, ending + 1, ending, None, 0.0, step.finished)
        step = registration.step(reports)
        if step.kind == StepKind.PassRewound and step.pass_index == ending:
            return Step(StepKind.Wait, None, ending, None, Waiting.HELD_ELSEWHERE, step.retry_in_s, step.finished)
        return step

    def _ask_round(self) -> None:
        """A worker whose registrations have no ask under way and two or more of them free
        (their tasks consumed) asks for up to `WORKER_ASKS_TOGETHER` tasks at once, saying so:
        the masters write the asks as one entry (one disk sync on each master for the round,
        as for the training process's own asks ahead), and each carries its registration's
        last finish, the first the rest too (an ask applied before its own finish would be
        answered that task again)."""
        carrier = self.carrier
        if carrier is None or self._asked_ahead():
            return
        ordered = sorted(self.registrations, key=Registration.ask_order, reverse=True)
        free = [registration for registration in ordered if not self._unconsumed(registration)]
        if len(free) >= 2:
            Registration.ask_ahead_together(free[:WORKER_ASKS_TOGETHER], carrier, [])

    def _asked_ahead(self) -> bool:
        """Whether a registration's step asked ahead is still to be taken."""
        return any(registration.asked_ahead() for registration in self.registrations)

    def _unconsumed(self, registration: Registration) -> bool:
        """Whether `registration` (of a worker whose asks carry its training process's finishes)
        holds a task the training loop has not consumed yet."""
        number = registration.number
        return self.carrier is not None and registration.held is not None and number is not None and self.carrier.consumed_upto() < number

    def _moved(self, step) -> bool:
        """The pass moved (or was rewound): every registration moves with it. True when this
        iteration is over (the pass it yielded batches of is)."""
        over = step.kind == StepKind.PassOver and step.pass_index > self.pass_index and self.yielded
        self.pass_index, self.drained = step.pass_index, False
        for other in self.registrations:
            if other is not self.passed_on:
                other.go_to(self.pass_index)
        if over and self.loader is not None:
            # The walk saw the pass over: the loader needs no read to know it.
            self.loader._walked_on = self.pass_index
            self.loader._ask_next_pass(self.registrations, self.passed_on)
        elif self.loader is not None and not self.yielded:
            # The pass this iteration walks (the others may have run the one it began with
            # while this process was away).
            self.loader.pass_index = self.pass_index
        return over

    def _task(self, registration: Registration, task: Task) -> Iterator[Item]:
        """The batches of the `task` `registration` was handed."""
        loader, carrier = self.loader, self.carrier
        dispatched_at = registration.asked_since or time.monotonic()
        if loader is not None and self.current is not None:
            # The loop consumed the last task: its finish report is queued.
            self.current.reported_upto = loader._reports_queued()
        receipt = registration.take(task)
        if loader is not None:
            loader._taken_in_pass += 1
        carry = None if carrier is None else (carrier.worker, self._issue(carrier, registration, receipt, dispatched_at))
        self.current = registration
        # In the training process itself (no DataLoader workers), while this task's last
        # batches are consumed, another registration asks for its next task (no sooner: a
        # task's deadline runs from its dispatch), once its last report is in. Workers do not
        # ask while they read (their asks already overlap the training loop, and a worker
        # holding tasks ahead makes the DataLoader, which takes batches from its workers in
        # turn, wait on the others), but ask for several at once (`_ask_round`).
        others = [other for other in self.registrations if other is not registration]

        def ask_ahead(left: int, count: int) -> bool:
            if loader is None:
                return False
            self.raise_if_stale()
            return self.dataset._ask_ahead(others, loader, left, count)

        yield from self.dataset._batches(task, ask_ahead, dispatched_at, carry)
        self.yielded, self.idle_since = True, None
        self.pause, self.unconsumed_pause = HELD_POLL_S_MIN, CONSUMED_POLL_S_MIN

    def _issue(self, carrier: WorkerCarrier, registration: Registration, receipt: Receipt, dispatched_at: float) -> int:
        """(A worker.) Records the task `registration` took (`receipt`) in the carriage
        (`Carriage.held`), unless it was already, and the tasks asked for at once with it as
        soon as they are answered, before this worker reads them: their deadlines run while
        they wait behind this task's batches, and the training process reports the progress of
        the tasks recorded there. The task's number (its finish's carry)."""
        issued, registration.issued = registration.issued, None
        if issued is not None and issued[0] == receipt:
            registration.number = issued[1]
        else:
            registration.number = carrier.issue(receipt, dispatched_at)
        for other in self.registrations:
            step = other.answered_with(registration)
            if step is not None and step.task is not None and not other.holds(step):
                asked = (step.task.task_id, step.task.dispatch)
                other.issued = (asked, carrier.issue(asked, other.asked_since or time.monotonic()))
        return registration.number

    def _own_reports_landed(self, steps: Steps) -> bool:
        """In the training process, a registration answered the task this process is
        reporting (the pass's last, usually): True to ask again at once, once more reports
        landed than when last seen, rather than after a pause."""
        if self.loader is None or not any(asker.holds(each) for asker, each in steps):
            return False
        answered = self.loader._reports_landed()
        if answered == self.landed:
            return False
        self.landed = answered
        return True

    def _idle_over(self, steps: Steps) -> bool:
        """Nothing was free, or a registration was answered its own task (its finish not in
        yet): True when this walk is over, else pauses. Never while the job has no dataset
        yet. A walk is over as soon as the pass's other tasks are held elsewhere: whoever holds
        them may wait for this process (a DataLoader takes its workers' batches in turn, so a
        worker waiting here would keep the loop from its siblings' batches, whose finishes end
        the pass; a DDP rank's step waits for the other ranks, so one waiting here would keep
        the others from their last steps). The training process then waits for the pass's end,
        and walks again for tasks that come back. While the training process's registrations
        are answered their own tasks, its walk asks again after a pause (the finishes usually
        land within it), for at most `PASS_END_IDLE_S`."""
        self.idle_since = self.idle_since or time.monotonic()
        held_elsewhere = any(each.waiting_for == Waiting.HELD_ELSEWHERE for _asker, each in steps)
        if held_elsewhere and (self.loader is None or not any(asker.holds(each) for asker, each in steps)):
            return True
        waiting_for_dataset = all(each.waiting_for == Waiting.NO_DATASET for _asker, each in steps)
        if not waiting_for_dataset and time.monotonic() - self.idle_since >= PASS_END_IDLE_S:
            return True
        time.sleep(self.pause)
        self.pause = min(self.pause * 2, HELD_POLL_S)
        return False
