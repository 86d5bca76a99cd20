"""`PassAhead`: the next pass's first task, asked for in the background by a `TaskLoader` without
workers as its walk sees a pass end, so that the next iteration's first batch does not wait for
a replicated write; given back to the queue unless that iteration begins within a hold.
Imports no PyTorch."""

from __future__ import annotations

import logging
import threading
from typing import Callable, Optional, Tuple

from ._torch_io import Registration
from .errors import Error
from .task_client import StepKind, TaskClient

_log = logging.getLogger(__name__)

#: How long the next pass's first task, asked for as a pass ended, waits for the loop's next
#: iteration before it goes back to the queue (at most a sixth of the task timeout, so that it
#: never nears its deadline): a loop that iterates its passes back to back takes it at once;
#: one that evaluates between them gives it back (its registration leaves the job, which counts
#: no failure against the task, and a new one registers in its place), so that a long
#: evaluation neither times the task out nor keeps it from the job's other processes.
PASS_AHEAD_HOLD_S = 0.5


class PassAhead:
    """The step one registration of a dataset asked ahead for the next pass at a pass's end, and
    the timer that gives its task back. `lock` is held while the task is given back: whoever
    touches the dataset's registrations from the training thread before the next iteration
    claims the step (`claim`) holds it too (`TaskLoader._flush_reports`)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # The registration asked ahead and its timer (`None`: none is held).
        self._held: Optional[Tuple[Registration, threading.Timer]] = None
        #: Steps asked ahead for a next pass, and the tasks given back because the next
        #: iteration did not begin within the hold.
        self.asked = 0
        self.given_back = 0

    def ask(self, registration: Registration, hold_s: float, make_client: Callable[[str], TaskClient]) -> None:
        """Asks `registration` (free: the pass is over) for its next step in the background;
        a task it is answered goes back to the queue unless `claim` comes within `hold_s`
        (`make_client(suffix)` makes the client that registers in the place of the one that left)."""
        with self.lock:
            if self._held is not None or not registration.ask_ahead():
                return
            timer = threading.Timer(hold_s, self._give_back, args=(registration, make_client))
            timer.daemon = True
            self._held = (registration, timer)
            self.asked += 1
            timer.start()

    def claim(self) -> None:
        """An iteration begins: the step asked ahead (if it was not given back) is its to take."""
        with self.lock:
            held, self._held = self._held, None
        if held is not None:
            held[1].cancel()

    def give_back(self, make_client: Callable[[str], TaskClient]) -> None:
        """Gives the task asked ahead back now (before a restore changes the job's queue)."""
        with self.lock:
            held = self._held
        if held is not None:
            held[1].cancel()
            self._give_back(held[0], make_client)

    def _give_back(self, registration: Registration, make_client: Callable[[str], TaskClient]) -> None:
        """(The timer's thread.) The hold ran out before an iteration claimed the step: a task
        it was answered goes back to the queue now, as its registration leaves the job, and a
        new client walks the pass in its place (registering at its first ask). Any other answer
        is left for the walk to take."""
        with self.lock:
            if self._held is None or self._held[0] is not registration:
                return
            self._held = None
            step = registration.answer_ahead()
            if step is None or step.kind != StepKind.Task:
                return
            try:
                registration.step()
                registration.client.leave()
                self.given_back += 1
            except Error as error:
                # The masters unreachable: the task goes back when the trainer's lease ends.
                _log.warning("task %d asked for the next pass was not given back now: %s", step.task.task_id, error)
            # The client that left is closed either way.
            registration.client = make_client(registration.suffix)
            try:
                registration.client.go_to(step.task.pass_index)
            except Error as error:
                _log.debug("the client in place of one that gave its task back registers at its first ask: %s", error)
