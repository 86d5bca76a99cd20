"""`Carriage`: the finish reports of the tasks a training process consumed, handed through
shared memory to the DataLoader workers that read those tasks, whose next ask carries them
(one replicated write for a task's finish and the next ask, as without workers, instead of
one each); `WorkerCarrier` is a worker's side of it. The training process still sends a
finish itself when no ask of its worker took it within the hold, at a flush (before it reads
the job's state), and when the worker that took it failed to send it or died. Imports no
PyTorch.

Each worker's tasks are numbered in the order it took them (from 1, across the worker
processes of successive passes, which share the worker's slot); per worker slot the shared
counters say which number the training process consumed last (`CONSUMED`), up to which the
finishes were claimed (`CLAIMED`: by an ask of the worker, or by the training process taking
one over) and up to which the worker's asks were answered (`ANSWERED`), each answer's verdict
kept in a ring beside the consumed receipts. Claims take the worker slot's lock, so exactly
one of the two sends each finish.

A worker also records each task it takes (its receipt and when it was asked for) under its
number, so that the training process can report the progress of the tasks its workers took
whose batches have not reached the loop yet (`held`): they wait in the DataLoader's queue
behind the batches before them, for as long as the loop takes over those, and without a
report a slow loop would lose them to the task timeout."""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os
import time
from typing import List, Optional, Sequence, Tuple

from .task_client import FINISHED_PER_STEP_MAX

Receipt = Tuple[int, int]

#: Consumed finishes a worker slot holds until they are claimed; a finish consumed while the
#: ring has no room goes by the training process alone.
RING = 1024
# The counters of a worker slot, each a task number of that worker (0: none yet).
CONSUMED, CLAIMED, ANSWERED, ISSUED, CARRIER = range(5)
FIELDS = 5
# A verdict: the task number shifted left by 2, with one of these in the low bits.
ACCEPTED, REFUSED, UNSENT = 1, 2, 3
#: Between looks of the training process at a worker's answer to an ask under way.
ANSWER_POLL_S = 0.0005
#: The longest the training process waits for a live worker's ask to answer the finishes it
#: carries (an ask waits at most the client's deadline, 60 s by default, for a leader).
ANSWER_WAIT_S_MAX = 300.0


class Carriage:
    """The shared memory of `workers` worker slots, made in the training process with the
    DataLoader's multiprocessing `context` before its workers start (they inherit it, or get it
    pickled as they are spawned; pickled any other way, it arrives switched off)."""

    def __init__(self, workers: int, context=None):
        context = context or multiprocessing.get_context()
        self.workers = workers
        self._locks = [context.Lock() for _ in range(workers)]
        self._counters = context.RawArray("q", workers * FIELDS)
        self._ring = context.RawArray("q", workers * RING * 3)
        self._verdicts = context.RawArray("q", workers * RING)
        # Per worker slot and task number (mod RING): the number, task id and dispatch of the
        # task the worker took, and when it was asked for (`time.monotonic()`, system-wide).
        self._taken = context.RawArray("q", workers * RING * 3)
        self._taken_at = context.RawArray("d", workers * RING)

    def __getstate__(self) -> dict:
        if multiprocessing.context.get_spawning_popen() is None:
            # Not to a worker being started (a copy, a pickle): shared memory cannot follow.
            return {"workers": self.workers, "_locks": None}
        return dict(self.__dict__)

    @property
    def on(self) -> bool:
        """Whether the shared memory is here (not in a copy made other than by starting a
        worker)."""
        return self._locks is not None

    def consumed(self, worker: int, number: int, receipt: Receipt) -> bool:
        """The training loop consumed task `number` of `worker` (`receipt`): its finish is
        offered to that worker's next ask. False when the ring has no room for it (the
        training process sends it)."""
        with self._locks[worker]:
            room = number - RING <= self._get(worker, CLAIMED)
            if room:
                slot = (worker * RING + number % RING) * 3
                self._ring[slot], self._ring[slot + 1], self._ring[slot + 2] = number, receipt[0], receipt[1]
            self._set(worker, CONSUMED, max(number, self._get(worker, CONSUMED)))
        return room

    def take_over(self, worker: int, number: int) -> bool:
        """Whether the finish of task `number` of `worker` is now the training process's to
        send (no ask of the worker claimed it); False: an ask carries it (`verdict` waits for
        its answer)."""
        with self._locks[worker]:
            if self._get(worker, CLAIMED) >= number:
                return False
            self._set(worker, CLAIMED, number)
            return True

    def verdict(self, worker: int, number: int) -> Optional[bool]:
        """Waits for the answer of the ask that carried task `number`'s finish: whether the
        master took it; `None` when it was not sent (the ask failed, or its worker died with
        it under way): the training process sends it itself."""
        deadline = time.monotonic() + ANSWER_WAIT_S_MAX
        carrier = self._get(worker, CARRIER)
        while self._get(worker, ANSWERED) < number:
            if not _alive(carrier) or time.monotonic() > deadline:
                return None
            time.sleep(ANSWER_POLL_S)
        verdict = self._verdicts[worker * RING + number % RING]
        if verdict >> 2 != number:
            return None
        return {ACCEPTED: True, REFUSED: False}.get(verdict & 3)

    def held(self) -> List[Tuple[Receipt, float]]:
        """The tasks the workers took and the training loop has not consumed to the end yet
        (the one it is consuming among them), each with when it was asked for."""
        held: List[Tuple[Receipt, float]] = []
        for worker in range(self.workers):
            issued = self._get(worker, ISSUED)
            for number in range(max(self._get(worker, CONSUMED), issued - RING) + 1, issued + 1):
                slot = worker * RING + number % RING
                if self._taken[slot * 3] == number:
                    held.append(((self._taken[slot * 3 + 1], self._taken[slot * 3 + 2]), self._taken_at[slot]))
        return held

    def _get(self, worker: int, field: int) -> int:
        return self._counters[worker * FIELDS + field]

    def _set(self, worker: int, field: int, value: int) -> None:
        self._counters[worker * FIELDS + field] = value


class WorkerCarrier:
    """A DataLoader worker's side of a `Carriage`: numbers the tasks it takes, says which the
    training loop consumed, and (as `Registration` takes a `Reports`) lets an ask `claim` the
    consumed finishes and `settle` their answers."""

    def __init__(self, carriage: Carriage, worker: int):
        self.carriage = carriage
        self.worker = worker
        # The claims whose asks are under way, in the order claimed.
        self._claims: List[_Claim] = []

    def issue(self, receipt: Receipt, asked_at: float) -> int:
        """The number of the task this worker takes now (`receipt`, asked for at `asked_at`),
        recorded for `Carriage.held` before the number is issued."""
        carriage, worker = self.carriage, self.worker
        number = carriage._get(worker, ISSUED) + 1
        slot = worker * RING + number % RING
        carriage._taken[slot * 3], carriage._taken[slot * 3 + 1], carriage._taken[slot * 3 + 2] = number, receipt[0], receipt[1]
        carriage._taken_at[slot] = asked_at
        carriage._set(worker, ISSUED, number)
        return number

    def consumed_upto(self) -> int:
        """The last of this worker's tasks the training loop consumed."""
        return self.carriage._get(self.worker, CONSUMED)

    def claim(self, leave: Sequence[Receipt] = ()) -> List[Receipt]:
        """The consumed finishes no ask or the training process took yet (at most
        `FINISHED_PER_STEP_MAX`), for this ask to carry, stopping before any of `leave` (the
        last finishes of asks sent at once with this one, which carry their own:
        `Registration.ask_ahead_together`): `settle` must follow. Claims are answered in any
        order; the training process learns a verdict once every earlier claim's is in."""
        carriage, worker = self.carriage, self.worker
        numbers: List[int] = []
        receipts: List[Receipt] = []
        with carriage._locks[worker]:
            start, end = carriage._get(worker, CLAIMED), carriage._get(worker, CONSUMED)
            for number in range(start + 1, end + 1):
                slot = (worker * RING + number % RING) * 3
                if carriage._ring[slot] != number:
                    continue  # not consumed (a stopped iteration's task), or sent by the training process
                receipt = (carriage._ring[slot + 1], carriage._ring[slot + 2])
                if receipt in leave:
                    end = number - 1
                    break
                numbers.append(number)
                receipts.append(receipt)
                if len(numbers) == FINISHED_PER_STEP_MAX:
                    end = number
                    break
            if end <= start:
                return []
            carriage._set(worker, CLAIMED, end)
            carriage._set(worker, CARRIER, os.getpid())
        claim = _Claim(receipts, numbers, end)
        self._claims.append(claim)
        if not numbers:
            self._answered(claim)
        return receipts

    def in_the_way(self, queued: int) -> bool:
        """Never: no thread of the worker sends finishes (each ask carries what it `claim`s),
        so none is ever under way in front of an ask (`Reports.in_the_way`)."""
        return False

    def settle(self, claimed: Sequence[Receipt], accepted: Optional[Sequence[bool]], failure: Optional[BaseException] = None) -> None:
        """The answers to the finishes of the claim that returned `claimed` (`accepted`, per
        receipt), or its ask's failure (the training process then sends them itself)."""
        claim = next(each for each in self._claims if each.receipts is claimed)
        answers = list(accepted) if failure is None and accepted is not None else [None] * len(claim.numbers)
        for number, taken in zip(claim.numbers, answers):
            code = UNSENT if taken is None else (ACCEPTED if taken else REFUSED)
            self.carriage._verdicts[self.worker * RING + number % RING] = (number << 2) | code
        self._answered(claim)

    def _answered(self, claim: "_Claim") -> None:
        """`claim`'s verdicts are written: the answered counter moves past every claim whose
        verdicts are in, up to the first still under way."""
        claim.answered = True
        while self._claims and self._claims[0].answered:
            self.carriage._set(self.worker, ANSWERED, self._claims.pop(0).end)


class _Claim:
    """One ask's claim of a worker's consumed finishes: the receipts it carries (the list
    object the ask settles with), their task numbers, and the number it claimed up to."""

    def __init__(self, receipts: List[Receipt], numbers: List[int], end: int):
        self.receipts = receipts
        self.numbers = numbers
        self.end = end
        self.answered = False


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie does not)."""
    if pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
