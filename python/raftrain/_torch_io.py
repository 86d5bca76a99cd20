"""What `raftrain.torch` sends to and asks of the masters off the training thread: a loader's
finish and progress reports (`Reports`, in order from a thread of their own) and one
registration's asks (`Registration`, one of which may be asked ahead on a thread while another
registration's task is consumed). Imports no PyTorch."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from typing import Callable, Optional, Tuple

from .task_client import StepKind, TaskClient

Receipt = Tuple[int, int]

#: The longest a report or an ask ahead waits for the reports queued before it to be answered:
#: a report is one call of at most the client's deadline (60 s by default), so this only ends
#: a wait on a reporting thread that can no longer answer.
REPORTS_WAIT_S_MAX = 300.0


class Reports:
    """A training process's finish and progress reports, sent in order by a thread of their
    own, so that the training loop never waits for the masters to take one. A report the process
    dies before sending is a task trained again (at least once); `flush` waits for every report
    queued so far (before the loader reads the job's state) and raises the first that failed;
    `landed` waits for the reports queued so far without raising (a registration about to ask
    again: its last task's finish must be in first, or the master answers that task again).

    `send(kind, receipt)` sends one report (on the reporting thread)."""

    def __init__(self, send: Callable[[str, Receipt], None]):
        self._send_one = send
        self._queue: "queue.Queue[Tuple[str, Receipt]]" = queue.Queue()
        self._failure: Optional[BaseException] = None
        # Reports queued, and answered (or failed), so far: `landed` waits on these.
        self._queued = 0
        self._answered = 0
        self._changed = threading.Condition()
        threading.Thread(target=self._send, name="raftrain-reports", daemon=True).start()

    def put(self, report: Tuple[str, Receipt]) -> None:
        """Queues `("finish", receipt)` or `("progress", receipt)`."""
        self._raise_failure()
        with self._changed:
            self._queued += 1
        self._queue.put(report)

    def flush(self) -> None:
        self._queue.join()
        self._raise_failure()

    @property
    def queued(self) -> int:
        """How many reports were queued so far (for `landed`)."""
        with self._changed:
            return self._queued

    def landed(self, queued: Optional[int] = None) -> int:
        """Waits until the first `queued` reports (every one queued so far by default) were
        answered or failed (a failure is raised by the next `put` or `flush`, in the training
        loop); returns how many were answered in all."""
        deadline = time.monotonic() + REPORTS_WAIT_S_MAX
        with self._changed:
            target = self._queued if queued is None else queued
            while self._answered < target and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            return self._answered

    def _send(self) -> None:
        while True:
            kind, receipt = self._queue.get()
            try:
                if self._failure is None:
                    self._send_one(kind, receipt)
            except BaseException as error:  # noqa: BLE001 - raised in the training loop
                self._failure = error
            finally:
                with self._changed:
                    self._answered += 1
                    self._changed.notify_all()
                self._queue.task_done()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure


class Registration:
    """One registration of a worker, and the task it last handed out (held until reported: the
    master answers a trainer that holds a task with that task). Its next step may be asked
    ahead on a thread of its own (`ask_ahead`) while another registration's task is consumed,
    so that a task hand-off does not wait for the master; an answer asked ahead and not used
    costs nothing: a task it handed out is answered again by the next ask.

    Answers asked ahead are taken first, in the order asked (`ask_order`): the master hands a
    pass's tasks out in the order of the asks, so a shuffled pass comes to the loop in its
    seeded order.

    `reported_upto` is how many reports the loader had queued once this registration's task
    was consumed (its finish among them; `None` while it is not): an ask ahead waits for those
    to be answered, or the master would answer that task again.

    `asked_since` is when this registration first asked after it took its last task: no task
    it takes next was dispatched before then, so a task's deadline (a timeout from its dispatch)
    runs from no earlier than that."""

    _asks = itertools.count()

    def __init__(self, client: TaskClient):
        self.client = client
        self.held: Optional[Receipt] = None
        self.asked_since: Optional[float] = None
        self._ahead: Optional[Tuple[threading.Thread, dict, int]] = None
        # When this registration last took a task, in the order of asks (-1: never).
        self._taken = -1
        self.reported_upto: Optional[int] = None

    def ask_order(self) -> Tuple[bool, int]:
        """Sorts registrations asked ahead first, in the order they were asked, then the others
        from the one that took its task longest ago (the likeliest to have it reported: one
        whose task is not is answered that task again, a write for nothing)."""
        if self._ahead is None:
            return (False, -self._taken)
        return (True, -self._ahead[2])

    def taken(self) -> int:
        """When this registration last took a task, in the order of asks (-1: never)."""
        return self._taken

    def take(self, step) -> None:
        """This registration's task `step` goes to the training loop."""
        self.held = (step.task.task_id, step.task.dispatch)
        self.asked_since = None
        self.reported_upto = None
        self._taken = next(Registration._asks)

    def ask_ahead(self, landed: Optional[Callable[[], int]] = None) -> None:
        """Asks for the next step on a thread, unless an ask is already under way; `landed`
        (given) runs on that thread first: it waits for this registration's last report."""
        if self._ahead is not None:
            return
        self._asking()
        answer: dict = {}

        def ask() -> None:
            try:
                if landed is not None:
                    landed()
                answer["step"] = self.client.step()
            except BaseException as error:  # noqa: BLE001 - raised where the step is taken
                answer["error"] = error

        thread = threading.Thread(target=ask, name="raftrain-ask-ahead", daemon=True)
        thread.start()
        self._ahead = (thread, answer, next(Registration._asks))

    def step(self):
        """The next step: the one asked ahead, or asked now."""
        if self._ahead is None:
            self._asking()
            return self.client.step()
        thread, answer, _order = self._ahead
        self._ahead = None
        thread.join()
        if "error" in answer:
            raise answer["error"]
        if self.holds(answer["step"]):
            # Asked before its last task's report landed: ask again now.
            return self.client.step()
        return answer["step"]

    def go_to(self, pass_index: int) -> None:
        """Moves the walk to `pass_index`, after any ask under way (its answer is dropped)."""
        if self._ahead is not None:
            self._ahead[0].join()
            self._ahead = None
        self.client.go_to(pass_index)

    def holds(self, step) -> bool:
        """Whether `step` is the task this registration already handed out."""
        return step.kind == StepKind.Task and self.held == (step.task.task_id, step.task.dispatch)

    def _asking(self) -> None:
        if self.asked_since is None:
            self.asked_since = time.monotonic()
