"""`PassAhead`: the next pass's first task, asked for by a `TaskLoader` without workers as a pass
ends (by the ask that carries the pass's last finish, or in the background as its walk sees the
pass end), so that the next iteration's first batch does not wait for a replicated write; given
back to the queue unless that iteration begins within a hold. Imports no PyTorch."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Optional, Tuple

from . import _native
from ._torch_io import Registration
from .errors import Error
from .task_client import TaskClient

_log = logging.getLogger(__name__)

#: How long the next pass's first task, asked for as a pass ended, waits for the loop's next
#: iteration before it goes back to the queue (at most a sixth of the task timeout, so that it
#: never nears its deadline): a loop that iterates its passes back to back, or evaluates for
#: less than this between them, takes it at once; one that evaluates longer gives it back (its
#: registration leaves the job, which counts no failure against the task, and a new one
#: registers in its place), so that a long evaluation neither times the task out nor keeps it
#: from the job's other processes for longer than this.
PASS_AHEAD_HOLD_S = 2.0
#: How long after the last hold ran out the thread that gives tasks back ends, nothing held (a
#: later pass's end starts another): a dataset no longer iterated leaves no thread behind for long.
GIVER_IDLE_S = 60.0

# What is held: the registration that asked, when its task goes back, and what makes the
# client that registers in its place.
_Held = Tuple[Registration, float, Callable[[str], TaskClient]]


class PassAhead:
    """The step one registration of a dataset asked ahead for the next pass at a pass's end, and
    the thread that gives its task back once the hold ran out (one thread for all the passes,
    started at the first ask, rather than one started on the training thread at every pass's
    end). Belongs to the process that made it (`pid`). `lock` is held while the task is given
    back: whoever touches the dataset's registrations from the training thread before the next
    iteration claims the step (`claim`) holds it too (`TaskLoader._flush_reports`)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self._due = threading.Condition(self.lock)
        self._held: Optional[_Held] = None
        self._giver: Optional[threading.Thread] = None
        # When the last hold runs out: the giving thread ends `GIVER_IDLE_S` after, if idle.
        self._idle_from = 0.0
        #: Steps asked ahead for a next pass, and the tasks given back because the next
        #: iteration did not begin within the hold.
        self.asked = 0
        self.given_back = 0

    def ask(self, registration: Registration, hold_s: float, make_client: Callable[[str], TaskClient]) -> None:
        """Asks `registration` (free: the pass is over) for its next step in the background,
        unless it asked already (the ask that ended the pass, `Walk._ask_past_pass_end`); a
        task it is answered goes back to the queue unless `claim` comes within `hold_s`
        (`make_client(suffix)` makes the client that registers in the place of the one that left)."""
        with self.lock:
            if self._held is not None or not registration.ask_ahead():
                return
            self._held = (registration, time.monotonic() + hold_s, make_client)
            self._idle_from = self._held[1]
            self.asked += 1
            if self._giver is None:
                self._giver = threading.Thread(target=self._give_back_when_due, name="raftrain-pass-ahead", daemon=True)
                self._giver.start()
            else:
                self._due.notify()

    def claim(self) -> None:
        """An iteration begins: the step asked ahead (if it was not given back) is its to take.
        (The thread is not woken: it finds nothing held at the hold's end.)"""
        with self.lock:
            self._held = None

    def give_back(self) -> None:
        """Gives the task asked ahead back now (before a restore changes the job's queue)."""
        with self.lock:
            held = self._held
        if held is not None:
            self._give_back(held)

    def _give_back_when_due(self) -> None:
        """(Its own thread.) Gives each task back once its hold ran out, unless claimed first;
        ends `GIVER_IDLE_S` after the last hold ran out, nothing held."""
        _native.run_as_background()
        while True:
            with self.lock:
                held = self._next_due()
                if held is None:
                    self._giver = None
                    return
            try:
                self._give_back(held)
            except Exception:  # noqa: BLE001 - the thread goes on giving back the next passes' tasks
                # (The step is no longer held: the task goes back when its trainer's lease ends.)
                _log.exception("the task asked for the next pass was not given back")

    def _next_due(self) -> Optional[_Held]:
        """(The giving thread, the lock held.) Waits for a step held past its hold, and returns
        it; `None` once `GIVER_IDLE_S` passed since the last hold ran out with nothing held (an
        ask wakes the thread, a claim does not: the thread finds nothing held at the hold's
        end)."""
        while True:
            now, held = time.monotonic(), self._held
            if held is not None and now >= held[1]:
                return held
            if held is None and now >= self._idle_from + GIVER_IDLE_S:
                return None
            self._due.wait((self._idle_from + GIVER_IDLE_S if held is None else held[1]) - now)

    def _give_back(self, held: _Held) -> None:
        """The hold ran out (or a restore comes) before an iteration claimed the step: a task it
        was answered goes back to the queue now, as its registration leaves the job, and a new
        client walks the pass in its place (registering at its first ask). Any other answer is
        left for the walk to take."""
        registration, _until, make_client = held
        with self.lock:
            if self._held is not held:
                return
            self._held = None
            step = registration.answer_ahead()
            task = None if step is None else step.task
            if task is None:
                return
            try:
                registration.step()
                registration.client.leave()
                self.given_back += 1
            except Error as error:
                # The masters unreachable: the task goes back when the trainer's lease ends.
                _log.warning("task %d asked for the next pass was not given back now: %s", task.task_id, error)
            # The client that left is closed either way.
            registration.client = make_client(registration.suffix)
            try:
                registration.client.go_to(task.pass_index)
            except Error as error:
                _log.debug("the client in place of one that gave its task back registers at its first ask: %s", error)
