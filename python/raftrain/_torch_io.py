"""What `raftrain.torch` sends to and asks of the masters off the training thread: a loader's
finish and progress reports (`Reports`, in order from a thread of their own) and one
registration's asks (`Registration`, one of which may be asked ahead in the background while
another registration's task is consumed). Imports no PyTorch."""

from __future__ import annotations

import collections
import itertools
import threading
import time
from typing import Callable, List, Optional, Protocol, Sequence, Tuple, Union

from . import _native
from .task import Task
from .task_client import FINISHED_PER_STEP_MAX, AskGather, PendingStep, Step, StepKind, TaskClient

Receipt = Tuple[int, int]


class Finishes(Protocol):
    """Where an ask takes the finishes it carries: the training process's `Reports`, or a
    DataLoader worker's `WorkerCarrier` (the finishes its training process consumed)."""

    def claim(self, leave: Sequence[Receipt] = ()) -> List[Receipt]: ...

    def settle(self, claimed: Sequence[Receipt], accepted: Optional[Sequence[bool]], failure: Optional[BaseException] = None) -> None: ...

    def in_the_way(self, queued: int) -> bool: ...


#: The longest `Reports.landed` waits for the reports queued before it to be answered:
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

    A registration about to ask takes the finishes not sent yet (`claim`) and reports them with
    its ask, in the same write (`settle` hands their answers back): a task hand-off in one
    write. So that the next ask finds them, the thread sends a finish only once it waited
    `hold_s` (0: at once; the loader holds them only where its own process asks) or a `flush` or
    `landed` waits for it, or a progress report is queued after it (a deadline is near: the
    reports before it go at once). Progress reports are never claimed; one that a claimed
    finish overtakes is answered "no longer held", which changes nothing.

    A finish may come with a `carry` (which worker's task it is, see `Carriage`): an ask of
    that DataLoader worker may carry it instead, within the hold.

    `send(kind, receipt, carry)` sends one report (on the reporting thread); `answered(task_id,
    dispatch, accepted)` takes a claimed finish's answer."""

    def __init__(
        self,
        send: Callable[[str, Receipt, Optional[Tuple[int, int]]], None],
        answered: Callable[[int, int, bool], None],
        hold_s: float = 0.0,
    ):
        self._send_one = send
        self._answered_claim = answered
        self._hold_s = hold_s
        # Reports not sent yet: (number in the order queued, kind, receipt, when queued, carry).
        self._waiting: "collections.deque[Tuple[int, str, Receipt, float, Optional[Tuple[int, int]]]]" = collections.deque()
        # The number of the report the thread is sending (`None`: none), and whether it is a
        # progress report.
        self._sending: Optional[int] = None
        self._sending_progress = False
        # Reports numbered below this are sent at once, held or not (a flush or landed waits).
        self._urgent_below = 0
        # Claimed finishes whose ask has not answered yet.
        self._claimed_open = 0
        self._failure: Optional[BaseException] = None
        self._queued = 0
        # Reports answered or failed so far (claimed ones once their ask answered).
        self._settled = 0
        lock = threading.Lock()
        # Waiters for answers (`flush`, `landed`) wait on `_changed`; the sending thread on
        # `_due_changed`, woken only when a report may be due sooner than it waits for (one
        # queued while it waits for any, a progress report, a flush or `landed` making a waiting
        # one urgent): a finish queued behind a held one, or claimed, wakes no thread (each
        # wake takes the training thread's interpreter lock for a moment).
        self._changed = threading.Condition(lock)
        self._due_changed = threading.Condition(lock)
        # Whether the sending thread waits for a report to be queued (rather than for one's
        # hold to run out: a finish queued meanwhile is due later than that). With a hold, an
        # idle thread looks again every `hold_s` instead, so a held finish wakes no thread (it
        # goes at most two holds after it was queued, unless an ask carries it first).
        self._sender_idle = False
        threading.Thread(target=self._send, name="raftrain-reports", daemon=True).start()

    def put(self, report: Tuple[str, Receipt], carry: Optional[Tuple[int, int]] = None) -> None:
        """Queues `("finish", receipt)` (with its `carry`, given) or `("progress", receipt)`."""
        self._raise_failure()
        kind, receipt = report
        with self._changed:
            if kind == "progress":
                # A task's deadline is near: nothing queued before its report waits a hold.
                self._make_urgent(self._queued)
            # A held finish wakes no thread: the idle sender looks every hold anyway.
            if kind == "progress" or (self._sender_idle and not self._hold_s):
                self._due_changed.notify()
            self._waiting.append((self._queued, kind, receipt, time.monotonic(), carry))
            self._queued += 1

    def hold_at_most(self, seconds: float) -> None:
        """Shortens the hold of finishes to `seconds`, now and for those already held (the task
        timeout was learned: a finish held past its task's deadline is refused, and the task
        trained again)."""
        with self._changed:
            if seconds < self._hold_s:
                self._hold_s = seconds
                self._due_changed.notify()

    def flush(self) -> None:
        """Waits until every report queued so far was answered (claimed ones by their ask), and
        raises the first that failed."""
        with self._changed:
            self._make_urgent(self._queued)
            while self._waiting or self._sending is not None or self._claimed_open:
                self._changed.wait()
        self._raise_failure()

    @property
    def queued(self) -> int:
        """How many reports were queued so far (for `landed`)."""
        with self._changed:
            return self._queued

    def landed(self, queued: Optional[int] = None) -> int:
        """Waits until none of the first `queued` reports (every one queued so far by default)
        is still to be sent or being sent by the thread (claimed ones go with the claimer's
        ask); a failure is raised by the next `put` or `flush`, in the training loop. Returns
        how many reports were answered in all."""
        deadline = time.monotonic() + REPORTS_WAIT_S_MAX
        with self._changed:
            target = self._queued if queued is None else queued
            self._make_urgent(target)
            while self._unsent_before(target) and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())
            return self._settled

    def clear_of(self, queued: int) -> None:
        """Waits until none of the first `queued` reports is in the way of an ask
        (`in_the_way`): the one the thread is sending answered, progress reports waiting sent.
        Finishes still held stay held, for the ask to carry."""
        deadline = time.monotonic() + REPORTS_WAIT_S_MAX
        with self._changed:
            while self._in_the_way(queued) and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())

    def progress_unanswered(self) -> bool:
        """Whether a progress report is queued or being sent (its answer not taken yet). One
        skipped after an earlier report failed counts as answered."""
        with self._changed:
            return self._sending_progress or any(kind == "progress" for _number, kind, *_rest in self._waiting)

    def in_the_way(self, queued: int) -> bool:
        """Whether one of the first `queued` reports is one an ask cannot carry yet: being
        sent by the thread, or a progress report waiting (an ask carries only finishes; those
        waiting are then sent at once, held or not)."""
        with self._changed:
            return self._in_the_way(queued)

    def _in_the_way(self, queued: int) -> bool:
        """`in_the_way`, the lock held."""
        if self._sending is not None and self._sending < queued:
            return True
        if any(number < queued and kind == "progress" for number, kind, *_rest in self._waiting):
            self._make_urgent(queued)
            return True
        return False

    def claim(self, leave: Sequence[Receipt] = ()) -> List[Receipt]:
        """Takes the finishes not sent yet (at most `FINISHED_PER_STEP_MAX`), in order, for an
        ask to carry, but those of `leave` (another ask sent with it carries them): `settle`
        must follow with their answers (or the ask's failure)."""
        with self._changed:
            if self._failure is not None:
                return []
            claimable = (item for item in self._waiting if item[1] == "finish" and item[4] is None and item[2] not in leave)
            claimed = list(itertools.islice(claimable, FINISHED_PER_STEP_MAX))
            for item in claimed:
                self._waiting.remove(item)
            self._claimed_open += len(claimed)
            self._changed.notify_all()
            return [receipt for _number, _kind, receipt, *_rest in claimed]

    def settle(self, claimed: Sequence[Receipt], accepted: Optional[Sequence[bool]], failure: Optional[BaseException] = None) -> None:
        """The answers to `claimed` finishes (`accepted`, per receipt), or the failure of the
        ask that carried them (raised in the training loop like a report's)."""
        try:
            if failure is None and accepted is not None:
                for receipt, taken in zip(claimed, accepted):
                    self._answered_claim(*receipt, taken)
        finally:
            with self._changed:
                if failure is not None and self._failure is None:
                    self._failure = failure
                self._claimed_open -= len(claimed)
                self._settled += len(claimed)
                self._changed.notify_all()

    def _make_urgent(self, below: int) -> None:
        """Reports numbered below `below` are sent at once, held or not (the lock is held)."""
        if below > self._urgent_below:
            self._urgent_below = below
            if self._waiting and self._waiting[0][0] < below:
                self._due_changed.notify()

    def _unsent_before(self, target: int) -> bool:
        if self._sending is not None and self._sending < target:
            return True
        return bool(self._waiting) and self._waiting[0][0] < target

    def _due_in(self) -> Optional[float]:
        """Seconds until the first waiting report is due (0: now; `None`: none waits)."""
        if not self._waiting:
            return None
        number, kind, _receipt, queued_at, _carry = self._waiting[0]
        if kind != "finish" or number < self._urgent_below:
            return 0.0
        return max(0.0, queued_at + self._hold_s - time.monotonic())

    def _send(self) -> None:
        _native.run_as_background()
        while True:
            with self._changed:
                due_in = self._due_in()
                while due_in is None or due_in > 0:
                    self._sender_idle = due_in is None
                    self._due_changed.wait(due_in if due_in is not None else (self._hold_s or None))
                    due_in = self._due_in()
                self._sender_idle = False
                self._sending, kind, receipt, _at, carry = self._waiting.popleft()
                self._sending_progress = kind == "progress"
            try:
                if self._failure is None:
                    self._send_one(kind, receipt, carry)
            except BaseException as error:  # noqa: BLE001 - raised in the training loop
                self._failure = error
            finally:
                with self._changed:
                    self._sending, self._sending_progress = None, False
                    self._settled += 1
                    self._changed.notify_all()

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise failure


class Registration:
    """One registration of a worker, and the task it last handed out (held until reported: the
    master answers a trainer that holds a task with that task). Its next step may be asked
    ahead (`ask_ahead`, started in the background by `TaskClient.step_ahead`: no Python thread
    waits for it) while another registration's task is consumed, so that a task hand-off does
    not wait for the master; an answer asked ahead and not used costs nothing: a task it handed
    out is answered again by the next ask.

    Answers asked ahead are taken first, in the order asked (`ask_order`): the master hands a
    pass's tasks out in the order of the asks, so a shuffled pass comes to the loop in its
    seeded order.

    `reported_upto` is how many reports the loader had queued once this registration's task
    was consumed (its finish among them; `None` while it is not): an ask ahead waits until none
    of those is still to be sent by the reporting thread, or the master would answer that task
    again.

    `asked_since` is when this registration first asked after it took its last task: no task
    it takes next was dispatched before then, so a task's deadline (a timeout from its dispatch)
    runs from no earlier than that."""

    _asks = itertools.count()

    def __init__(self, client: TaskClient, suffix: str = ""):
        self.client = client
        #: The name its client registers under, after the dataset's (`TaskDataset.client`).
        self.suffix = suffix
        self.held: Optional[Receipt] = None
        self.asked_since: Optional[float] = None
        self._ahead: Optional[_Ahead] = None
        # When this registration last took a task, in the order of asks (-1: never).
        self._taken = -1
        self.reported_upto: Optional[int] = None
        # A worker's number for its last task, whose finish its asks carry (`Carriage`).
        self.number: Optional[int] = None
        # When the held task was asked for (its dispatch was no earlier).
        self._held_asked_since: Optional[float] = None
        # A worker's task recorded as taken before this registration took it (asked for at
        # once with the task taken before it), and its number.
        self.issued: Optional[Tuple[Receipt, int]] = None
        # The steps the last answered one was asked at once with (`_Ahead.group`).
        self._answered_group: Optional[list] = None
        # Whether this registration forgot a task it held that may not have been consumed
        # (`forget_held`) and has not asked since: the master answers its ask with that task.
        self._forgot = False

    def ask_order(self) -> Tuple[bool, int]:
        """Sorts registrations asked ahead first, in the order they were asked, then the others
        from the one that took its task longest ago (the likeliest to have it reported: one
        whose task is not is answered that task again, a write for nothing)."""
        if self._ahead is None:
            return (False, -self._taken)
        return (True, -self._ahead.order)

    def forgot(self) -> bool:
        """Whether this registration forgot a task it held that the loop may not have
        consumed (`forget_held`), and has not asked since: the master answers it that task."""
        return self._forgot

    @staticmethod
    def in_pass_order(ordered: "List[Registration]") -> "List[Registration]":
        """`ordered` (by `ask_order`), those first whose steps were asked together put in the
        pass's order of their tasks, those answered "wait" after them: the masters applied the
        asks in whatever order they arrived, and a shuffled pass comes to the loop in its
        seeded order (at a pass's end some of the asks find nothing free)."""
        group = ordered[0]._ahead.group if ordered and ordered[0]._ahead is not None else None
        if group is None:
            return ordered
        together = list(itertools.takewhile(lambda each: each._ahead is not None and each._ahead.group is group, ordered))
        try:
            answered = [(each._ahead.pending.result(), each) for each in together if each._ahead is not None]
        except Exception:  # noqa: BLE001 - raised again where the step is taken
            return ordered
        tasks = [(step.task, each) for step, each in answered if step.kind == StepKind.Task and step.task is not None]
        waiting = [each for step, each in answered if step.kind == StepKind.Wait]
        if len(tasks) + len(waiting) < len(together) or len({task.pass_index for task, _each in tasks}) > 1:
            # The pass moved or the job ended among the answers: taken as asked.
            return ordered
        ranked = sorted(tasks, key=lambda task: task[0].pass_rank)
        return [each for _task, each in ranked] + waiting + ordered[len(together) :]

    def taken(self) -> int:
        """When this registration last took a task, in the order of asks (-1: never)."""
        return self._taken

    def take(self, task: Task) -> Receipt:
        """This registration's `task` goes to the training loop: its receipt, now held."""
        self.held = (task.task_id, task.dispatch)
        self._held_asked_since, self.asked_since = self.asked_since, None
        self.reported_upto = None
        self._taken = next(Registration._asks)
        return self.held

    def forget_held(self) -> None:
        """A new iteration begins, every finish queued before it answered: a task this
        registration handed out and the master answers again was not consumed (the last
        iteration stopped inside it, at a `break`), so it goes to the loop again, whole, rather
        than waiting out its timeout. Not while a step asked ahead is under way (its answer may
        be that task, asked before its finish landed). A task the training process's loop may
        not have consumed (`reported_upto` unset) is remembered as `forgot`: its registration
        asks though others were answered "wait"."""
        if self._ahead is None and self.held is not None:
            self.held, self._forgot = None, self.reported_upto is None
            # Its deadline runs from its dispatch, no later than this.
            self.asked_since = self._held_asked_since

    def ask_ahead(self, reports: Optional[Finishes] = None, upto: Optional[int] = None) -> bool:
        """Starts this registration's next step in the background, unless one is under way,
        carrying the finishes `reports` (given) has not sent yet. Not while one of the first
        `upto` reports (its last task's finish may be among them: the master would answer that
        task again) is in the way (`Reports.in_the_way`): it answers False (ask again later)."""
        if self._ahead is not None:
            return True
        if reports is not None and upto is not None and reports.in_the_way(upto):
            return False
        self._start_ahead(reports)
        return True

    @staticmethod
    def ask_ahead_together(group: "List[Registration]", reports: Finishes, upto: List[int]) -> bool:
        """`ask_ahead` of the registrations of `group` at once (none has a step under way),
        in one call (an `AskGather`) which the masters write together: one replicated entry
        for all their asks. Each ask
        carries its own registration's last finish (the first the rest too): the masters apply
        the asks in whatever order they arrive, and one applied before its own finish would be
        answered its task again. Not while a report of `upto` (per registration) is in the
        way: False."""
        if any(reports.in_the_way(each) for each in upto):
            return False
        together: list = []
        gather = AskGather(len(group))
        for index, registration in enumerate(group):
            leave = [later.held for later in group[index + 1 :] if later.held is not None]
            registration._start_ahead(reports, together=gather, leave=leave, group=together)
        return True

    def _start_ahead(self, reports: Optional[Finishes], together: Union[int, AskGather] = 1, leave: Sequence[Receipt] = (), group: Optional[list] = None) -> None:
        """Starts the step ahead, one of `together` (of `group`, given), carrying the finishes
        `reports` has not sent yet but those of `leave`."""
        self._asking()
        claimed = reports.claim(leave) if reports is not None else []
        try:
            pending = self.client.step_ahead(claimed, together)
        except BaseException as error:
            if reports is not None and claimed:
                reports.settle(claimed, None, error)
            raise
        self._ahead = _Ahead(pending, claimed, reports, next(Registration._asks), group)

    def asked_ahead(self) -> bool:
        """Whether a step asked ahead is still to be taken (`step`)."""
        return self._ahead is not None

    def step(self, reports: Optional[Finishes] = None) -> Step:
        """The next step: the one asked ahead, or asked now (carrying the finishes `reports`,
        given, has not sent yet)."""
        if self._ahead is None:
            self._asking()
            return self._ask(reports)
        ahead, self._ahead = self._ahead, None
        self._answered_group = ahead.group
        step = ahead.answer()
        if self.holds(step):
            # Asked before its last task's report landed: ask again now.
            return self._ask(reports)
        return step

    def asked_at_once_with(self, other: "Registration") -> bool:
        """Whether this registration's step asked ahead, still to be taken, was asked at once
        with the one `other` took last."""
        ahead = self._ahead
        return self is not other and ahead is not None and ahead.group is not None and ahead.group is other._answered_group

    def answered_with(self, other: "Registration") -> Optional[Step]:
        """The answer (waited for) to this registration's step asked at once with the one
        `other` took last; `None` when there is none such or it failed (`step` raises it)."""
        if not self.asked_at_once_with(other):
            return None
        return self.answer_ahead()

    def answer_ahead(self) -> Optional[Step]:
        """The answer (waited for) to the step asked ahead, left to be taken (`step`); `None`
        when there is none or it failed (`step` raises it)."""
        if self._ahead is None:
            return None
        try:
            return self._ahead.pending.result()
        except Exception:  # noqa: BLE001 - raised again where the step is taken
            return None

    def settle_ahead(self) -> None:
        """Waits for the step asked ahead, if any, and hands the answers to the finishes it
        carries to their `Reports` (a flush waits for them); the step is kept for `step`."""
        if self._ahead is not None:
            self._ahead.settle_quietly()

    def go_to(self, pass_index: int) -> None:
        """Moves the walk to `pass_index`, after any ask under way (its answer is dropped)."""
        self._drop_ahead()
        self.client.go_to(pass_index)

    def close(self) -> None:
        """Stops this registration's heartbeats, after any ask under way."""
        self._drop_ahead()
        self.client.close()

    def holds(self, step) -> bool:
        """Whether `step` is the task this registration already handed out."""
        return step.kind == StepKind.Task and self.held == (step.task.task_id, step.task.dispatch)

    def _drop_ahead(self) -> None:
        if self._ahead is not None:
            self._ahead.settle_quietly()
            self._ahead = None

    def _asking(self) -> None:
        self._forgot = False
        if self.asked_since is None:
            self.asked_since = time.monotonic()

    def _ask(self, reports: Optional[Finishes]) -> Step:
        """One step now, carrying the finishes `reports` has not sent yet."""
        claimed = reports.claim() if reports is not None else []
        try:
            step = self.client.step(claimed)
        except BaseException as error:
            if reports is not None and claimed:
                reports.settle(claimed, None, error)
            raise
        if reports is not None and claimed:
            reports.settle(claimed, step.finished)
        return step


class _Ahead:
    """A step asked ahead: what `TaskClient.step_ahead` returned, the finishes it carries (their
    answers go to `reports` once, when the step is first answered) and its place in the order
    of asks."""

    def __init__(self, pending: PendingStep, claimed: List[Receipt], reports: Optional[Finishes], order: int, group: Optional[list] = None):
        self.pending = pending
        self.claimed = claimed
        self.reports = reports
        self.order = order
        #: The same object for the steps asked at once with this one (written together,
        #: applied in the order they arrived); `None` for a step asked alone.
        self.group = group

    def answer(self) -> Step:
        """The step (waited for), or its error raised; the claimed finishes settled first."""
        try:
            step = self.pending.result()
        except BaseException as error:
            self._settle(None, error)
            raise
        self._settle(step.finished)
        return step

    def settle_quietly(self) -> None:
        """Waits for the answer and settles the claimed finishes; a failure goes to `reports`
        (raised in the training loop by its next flush) rather than here."""
        try:
            self.answer()
        except Exception:  # noqa: BLE001 - recorded in reports by `answer`
            pass

    def _settle(self, accepted, failure: Optional[BaseException] = None) -> None:
        claimed, self.claimed = self.claimed, []
        if claimed and self.reports is not None:
            self.reports.settle(claimed, accepted, failure)
