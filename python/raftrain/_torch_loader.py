"""`TaskLoader`: a `TaskDataset` through a DataLoader, one pass of the job per iteration, each task
reported finished once the training loop consumed it; and its DistributedDataParallel passes.
`raftrain.torch` documents how they work and exports them."""

from __future__ import annotations

import logging
import multiprocessing
import operator
import threading
import time
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Tuple, cast

import torch
from torch.utils.data import DataLoader, default_convert

from ._torch_carry import Carriage
from ._torch_io import Receipt, Registration, Reports
from ._torch_pass_ahead import PASS_AHEAD_HOLD_S
from ._torch_supersede import stop_workers_holding_tasks, supersede_suspended
from ._torch_takeover import DATASETS
from ._torch_walk import Item, stale_iteration
from .errors import Error, InvalidArgument, JobEnded
from .task_client import TaskClient, leave_together, raise_if_failed, register_together

_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from torch.distributed.algorithms.join import Joinable

    from .torch import TaskDataset

#: The longest pause between looks at the master (a linearizable read) while this process waits
#: for the pass's other tasks to finish (the first looks come sooner): short, because the
#: process that finishes the pass starts the next at once, and one that noticed later than
#: the next pass took to run would find it over and miss it.
PASS_END_POLL_S = 0.05
#: Tasks are back in the queue but the last walk found none free for this process (a restore
#: holds the queue until the job's pservers reloaded, or another process took them first):
#: the pause before walking again, doubled after each such walk up to the longest.
REWALK_PAUSE_S_MIN = 0.05
REWALK_PAUSE_S_MAX = 1.0
#: Without DataLoader workers, how long a finish report waits for this process's next ask to
#: carry it (one write for the finish and the ask) before the reporting thread sends it alone:
#: longer than a task's batches take the loop at the rates where a write per task costs (tasks
#: of a few milliseconds), short against any task timeout. A pass's end or a state read sends
#: it at once.
FINISH_HOLD_S = 0.25
#: With DataLoader workers, before the task timeout is known (the first progress report's
#: answer says it), the pause between looks at the tasks the workers took ahead.
WORKERS_HELD_LOOK_S = 0.05
#: With DataLoader workers, how long a finish report waits for an ask of the worker that read
#: its task to carry it (`Carriage`) before the reporting thread sends it alone: longer than
#: the time between a worker's asks at the rates where a write per task costs. A worker asks
#: for several tasks at once (`WORKER_ASKS_TOGETHER`), so the last of a round's finishes waits
#: for the worker's next round: with rounds of two, about 0.3 s at the benchmark's batch 64 with
#: two workers, where a hold of 0.25 s sent one finish in four alone, each a write of its own
#: (12.5 a pass; 2, the pass's last, with 1 s). A pass's end or a state read sends what is held
#: at once.
CARRY_HOLD_S = 1.0
#: Either hold is at most this share of the task timeout once the loader learned it (a job's
#: minimum timeout may be as short as 0.1 s): a finish held while its task's deadline runs out
#: is refused, and the task trained again. A task's progress is reported every third of the
#: timeout, so a finish sent within a sixth lands within half a timeout of the last report.
HOLD_TIMEOUT_SHARE = 1 / 6
#: Checkpoint ids are unsigned 64-bit numbers: this one and above name none.
CHECKPOINT_ID_END = 2**64


#: DataLoader options a `TaskLoader` refuses, and why: the dataset batches and orders itself.
DATASET_OPTIONS = {
    "batch_size": "TaskDataset batches itself: give batch_size to the TaskDataset",
    "shuffle": "the job is shuffled or not: give TaskDataset(..., shuffle=True, seed=...) (the masters deal each pass's tasks in a seeded order and each task's samples are permuted)",
    "sampler": "the masters deal the tasks: a TaskLoader takes no sampler (TaskDataset(..., shuffle=True, seed=...) shuffles)",
    "batch_sampler": "the masters deal the tasks and TaskDataset batches them: a TaskLoader takes no batch_sampler",
    "drop_last": "a batch never spans two tasks, so each task's last batch holds the rest of its samples; dropping it would drop samples of every task: make shard_size a multiple of batch_size for equal batches",
}


def _refuse_dataset_options(dataloader_options: Dict[str, object]) -> None:
    """Raises `InvalidArgument` naming a DataLoader option given that is the dataset's
    (`DATASET_OPTIONS`); None or False (DataLoader's defaults) are accepted."""
    for option, why in DATASET_OPTIONS.items():
        value = dataloader_options.pop(option, None)
        if value is not None and value is not False:
            raise InvalidArgument(f"{option}={value!r}: {why}")


class TaskLoader:
    """Iterates a `TaskDataset` through a DataLoader, exactly one pass of the job per iteration
    (`pass_index` says which), and reports each task finished once the training loop has
    consumed its last batch (see the module's documentation). Loop
    `while not loader.job_finished: for batch in loader: ...`; with DistributedDataParallel,
    iterate `loader.ddp(model)` instead."""

    def __init__(self, dataset: TaskDataset, *, allow_ended: bool = False, **dataloader_options: Any):
        _refuse_dataset_options(dataloader_options)
        self.dataset = dataset
        convert = _BatchConverted(dataloader_options.pop("collate_fn", None) or default_convert)
        # The DataLoader's collate_fn with workers; without them `_items` applies it item by item.
        self._convert = convert
        # (With batch_size=None the DataLoader gives its collate_fn one item, not the list its type says.)
        self.dataloader: "DataLoader[Any]" = DataLoader(dataset, batch_size=None, collate_fn=cast(Callable[[List[Any]], Any], convert), **dataloader_options)
        # Iterated in this process (no workers), the dataset asks ahead once these reports land.
        dataset._loader = self
        if dataset._loaders is None:
            # A copy of a dataset (pickled, deep-copied) comes without the loaders of the original.
            dataset._loaders = weakref.WeakSet()
        dataset._loaders.add(self)
        #: Tasks this loader reported finished, and reports the master refused (taken back).
        self.finished: int = 0
        self.refused: int = 0
        #: Finishes (accepted or refused) an ask of a DataLoader worker carried: one write for
        #: the finish and the worker's next task (the rest this process sent alone).
        self.carried: int = 0
        #: Progress reports that moved a task's deadline on.
        self.progressed: int = 0
        #: The pass the last iteration walked (`None` before the first).
        self.pass_index: Optional[int] = None
        #: The last epoch a trainer gave `set_epoch` (`None` before any).
        self.epoch: Optional[int] = None
        # Finish answers come from the reporting thread and from asking threads.
        self._counting = threading.Lock()
        # Finishes refused and not warned of yet: `(task_id, dispatch)`.
        self._refusals: list = []
        self._reporter: Optional[TaskClient] = None
        # The trainers this loader registered for its DataLoader workers (`_lend_trainers`).
        self._lent_clients: List[TaskClient] = []
        # Their ids, per worker (what the dataset hands the workers).
        self._lent: Dict[int, List[int]] = {}
        # The shared memory through which the workers' asks carry this process's finishes.
        self._carriage: Optional[Carriage] = None
        self._reports: Optional[Reports] = None
        self._job_reported = False
        # Whether the job was seen running: a job that had ended before raises `JobEnded`
        # (unless `allow_ended`), rather than letting a script train nothing and succeed.
        self._seen_running = allow_ended
        # Per task being consumed: when its progress is due next (infinity: no longer held).
        self._progress_due: Dict[Receipt, float] = {}
        # The pass this process's walk moved on to as it saw the last one end (no workers;
        # `None`: not since the last iteration began): the next iteration walks it.
        self._walked_on: Optional[int] = None
        # Walks in a row that found no task free for this process (`_pause_if_fruitless`).
        self._fruitless_walks = 0
        # The thread an iteration of this loader is under way in (its generator not closed;
        # `None`: none is).
        self._iterating_in: Optional[int] = None
        # Iterations begun or superseded so far (`_torch_supersede`): a suspended one whose
        # number is no longer this raises as it resumes.
        self._iterations = 0
        # The DataLoader's iterator of an iteration with workers (to shut them down).
        self._workers_iter: Optional[Iterator[object]] = None
        # The shortest task timeout a progress report was answered with (`None` before one):
        # a task's first progress report is due a third of it after the task was asked for.
        self._task_timeout_s: Optional[float] = None
        # When `_consuming` next looks at the tasks the workers took ahead.
        self._workers_held_look = 0.0
        # (DDP, no workers.) This rank's share of the pass's tasks, and the tasks it took of the
        # pass so far: it asks ahead for no more than its share (`TaskDataset._ask_ahead`).
        # `None`: no share, as any process that is not one of several ranks stepping together.
        self._pass_share: Optional[int] = None
        self._taken_in_pass = 0

    def __iter__(self) -> Iterator[Any]:
        """One pass: the batches this process gets of it, then a wait until the pass is over
        (its last tasks may be held by other processes; tasks that come back to the queue
        meanwhile are taken here too). Nothing when the job has ended. Without workers, a pass
        the walk itself saw end (its ask was answered with the next pass: a write through the
        leader) needs no read of the job's state, at its end or at the next one's start; a
        pass whose end was read needs none at the next one's start either."""
        walked_on, self._walked_on = self._walked_on, None
        # Not a rank of `ddp(model)`: no share caps its asks ahead.
        self._pass_share = None
        if walked_on is not None:
            self.pass_index = walked_on
        else:
            status = self._job_status()
            self.pass_index = None if status["ended"] else status["pass"]
        while self.pass_index is not None:
            yield from self._batches()
            if self._walked_on is not None and self._walked_on > self.pass_index:
                # The walk saw the pass end: the job was not cancelled.
                self._warn_refused(cancelled=False)
                return
            status = self._wait_for_pass_end(self.pass_index)
            if status["over"]:
                if not status["ended"]:
                    # The pass the next iteration walks, just read: it needs no read of its own
                    # (its walk follows the pass if it moved on meanwhile).
                    self._walked_on = status["pass"]
                return
            self._pause_if_fruitless()

    def __len__(self) -> int:
        """Not known: `len()` raises `TypeError`, as for any iterable without a length, and
        `batches_per_pass` gives an index job's count. How many batches one iteration yields
        depends on what the other processes of the job take, on tasks taken back and handed
        out again, and on a `load_state_dict()` mid-pass (the task that was being consumed comes
        again whole). A trainer that stops at `len()` batches (Lightning does, when a loader has
        a length) would stop short of a pass, or never ask for the batch after the pass's last
        one, so the pass's last task would not be reported; without a length it iterates to the
        end of each pass."""
        raise TypeError(
            "a TaskLoader's batches per iteration are not known in advance (other processes, tasks "
            "handed out again, a resume mid-pass): see TaskLoader.batches_per_pass"
        )

    @property
    def batches_per_pass(self) -> Optional[int]:
        """An index job's batches in one whole pass (every task's range cut into `batch_size`
        batches): what this process gets when it is the job's only consumer and nothing is
        handed out again; fewer when several share the job. For progress bars and schedules,
        not for stopping the loop. `None` for a RecordIO job, whose batch count is not known
        before its chunks are read."""
        if self.dataset.index is None:
            return None
        _job, size, shard_size = self.dataset.index
        full, rest = divmod(size, shard_size)
        per_full = -(-shard_size // self.dataset.batch_size)
        return full * per_full + (-(-rest // self.dataset.batch_size))

    def set_epoch(self, epoch: int) -> None:
        """What loops written for a reseeding sampler call before each epoch (as on accelerate's
        prepared loaders). The passes are the job's (`pass_index`): the masters decide which
        tasks a pass hands out and in what order, so nothing is reseeded here; the epoch is kept
        in `epoch` for the caller to compare with `pass_index`."""
        self.epoch = int(epoch)

    @property
    def client(self) -> TaskClient:
        """This loader's own `TaskClient` of the job (it sends the finish and progress reports
        and records checkpoints): for `status()`, `record_eval`, `checkpoint()`. Made on first
        use; use it from the training process only."""
        return self._reporter_client()

    def state_dict(self) -> Dict[str, Any]:
        """What resumes this job's data where it is now (torchdata's `StatefulDataLoader`
        protocol): records a progress checkpoint through the masters (the pass and which tasks
        are done, one replicated entry; the job's pservers record theirs under its id) and
        returns its id with the pass. Save it with the model's state."""
        self._job_status()  # the job exists (reported) and runs
        checkpoint_id = self._reporter_client().checkpoint()
        return {"raftrain_checkpoint": checkpoint_id, "job": self._reporter_client().job, "pass_index": self.pass_index}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Puts the job back to `state` (from `state_dict()`): the tasks done after it are
        done again, at least once, and a job with pservers gets its model back from their
        checkpoints first. With several training processes, one of them restores (rank 0);
        the others just go on iterating."""
        if not isinstance(state, dict) or "raftrain_checkpoint" not in state:
            keys = sorted(state) if isinstance(state, dict) else type(state).__name__
            raise InvalidArgument(f"not a TaskLoader state (no raftrain_checkpoint key): {keys}")
        job = self._reporter_client().job
        if state.get("job") not in (None, job):
            # Checkpoint ids count per job: another job's id would name one of this job's.
            raise InvalidArgument(f"the state is of job {state['job']!r}, this loader's job is {job!r}")
        # A task asked for the next pass goes back first (the restore puts the queue back).
        self.dataset._next_pass_ask().give_back()
        restored = self._reporter_client().restore(_checkpoint_id(state["raftrain_checkpoint"]))
        self.pass_index = restored["pass_index"]
        # The pass the walk last saw is no longer the next iteration's.
        self._walked_on = None

    def ddp(self, model: "Joinable") -> "_DdpPasses":
        """This loader for DistributedDataParallel: each iteration is one pass on every rank
        together. A rank whose batches of the pass ran out shadows the others' steps
        (`torch.distributed.algorithms.Join` over `model`, the `DistributedDataParallel`
        wrapper the loop steps, not the module inside it) instead of blocking them, the ranks
        then wait together for the pass to end, and they check that they walk the same pass
        (a `RuntimeError` names a rank that does not, rather than averaging gradients of two
        passes). Loop `while not passes.job_finished: for batch in passes: ...`."""
        return _DdpPasses(self, model)

    def _batches(self) -> Iterator[Any]:
        """The DataLoader's batches of this process, reporting each task as it is consumed."""
        self._progress_due.clear()
        # The next pass's first task, asked for as the last pass ended, is this iteration's.
        self.dataset._next_pass_ask().claim()
        # The loader iterating the dataset is the one whose reports its asks carry (another
        # loader of the same dataset may have been made since this one).
        self.dataset._loader = self
        # New registrations (a new worker's, each pass unless persistent) walk from this pass.
        self.dataset._pass_hint = self.pass_index
        supersede_suspended(self.dataset)
        self._release_stopped_loaders()
        DATASETS.take_over(self.dataset)
        self._lend_trainers()
        fruitless = True
        self._iterations += 1
        mine = self._iterations
        self._iterating_in = threading.get_ident()
        try:
            for batch, receipts, holding, dispatched_at, carry, pass_index in self._items():
                if self.pass_index is not None and pass_index > self.pass_index and self._pass_moved_on(int(pass_index), fruitless):
                    break
                fruitless = False
                self._consuming((int(holding[0]), int(holding[1])), float(dispatched_at))
                yield batch
                if self._iterations != mine:
                    # Superseded while suspended: its tasks went back, its workers are gone.
                    raise stale_iteration(self.dataset.job_name())
                # The loop asked for the next batch: it has consumed this one.
                for task_id, dispatch in receipts:
                    self._progress_due.pop((int(task_id), int(dispatch)), None)
                    self._report(int(task_id), int(dispatch), None if carry is None else (int(carry[0]), int(carry[1])))
        finally:
            if self._iterations == mine:
                self._iterating_in, self._workers_iter = None, None
        self._fruitless_walks = self._fruitless_walks + 1 if fruitless else 0

    def _ask_next_pass(self, registrations: List[Registration], asked: Optional[Registration] = None) -> None:
        """(No workers.) The walk saw the pass end: one of its `registrations` (all free) asks
        for the next pass's first task in the background, so that the next iteration's first
        batch does not wait for a replicated write, and gives it back unless that iteration
        begins within the hold (`PassAhead`); or `asked` already did, with the ask that ended
        the pass (`Walk._ask_past_pass_end`). Not before the task timeout is known (the hold is
        a share of it), nor for a DDP rank (the ranks decide each pass's start together)."""
        hold_s = self.pass_ahead_hold_s()
        if hold_s is None:
            return
        first = asked or min(registrations, key=Registration.taken)
        self.dataset._next_pass_ask().ask(first, hold_s, self.dataset.client)

    def pass_ahead_hold_s(self) -> Optional[float]:
        """How long a task asked for the next pass as the last one ended waits for the next
        iteration (`PASS_AHEAD_HOLD_S`, at most a share of the task timeout); `None` where none
        is asked for: the task timeout not known yet, or a DDP rank."""
        timeout_s = self._task_timeout_s
        if timeout_s is None or self._pass_share is not None:
            return None
        return min(PASS_AHEAD_HOLD_S, timeout_s * HOLD_TIMEOUT_SHARE)

    def _pass_moved_on(self, pass_index: int, fruitless: bool) -> bool:
        """A batch of pass `pass_index`, later than this iteration's: the pass had moved on when
        a DataLoader worker asked (another process ran the rest of it meanwhile; a walk in this
        process follows the pass itself). Before the iteration yielded a batch, it walks that
        pass: False. After, its pass is over (a later pass's task is handed out only then), so
        True: the iteration ends before the batch, whose task was not consumed, so not
        reported, and its holder is answered it again in the next iteration."""
        if fruitless:
            self.pass_index = pass_index
            return False
        self._walked_on = pass_index
        return True

    def _release_stopped_loaders(self, waiting: bool = False) -> None:
        """The trainers another loader of the dataset lent its workers, where that loader is
        not iterating (its loop stopped inside a pass, and this one took over: a notebook cell
        run again), leave the job: the tasks its stopped workers took go back to the queue now,
        for this loader's workers, rather than at their timeout (each timeout counts against
        the task's failure budget). That loader lends new ones if it iterates again. A loader
        whose workers persist keeps them (they ask as the trainers they were started with)
        unless this one is `waiting` for its pass's end and they hold tasks the other's loop
        did not consume: they are stopped (`stop_workers_holding_tasks`), and its next iteration
        starts new ones."""
        for other in self.dataset.loaders():
            if other is self or other._iterating_in is not None or not other._lent_clients:
                continue
            if other.dataloader.persistent_workers:
                if waiting:
                    stop_workers_holding_tasks(other)
                continue
            clients, other._lent_clients, other._lent = other._lent_clients, [], {}
            try:
                leave_together(clients)
            except Error as error:
                # Closed already: what they hold goes back when their lease ends.
                _log.debug("the trainers of a stopped loader did not leave the job: %s", error)

    def _items(self) -> Iterator[Item]:
        """The dataset's items through the DataLoader: converted (its `collate_fn`), pinned
        (its `pin_memory`), from its workers. Without workers or pinning, the same conversion
        applied here, item by item: the DataLoader's own iteration would add its per-batch
        machinery (a profiler range, a fetcher, a sampler) to every batch and nothing else."""
        dataloader = self.dataloader
        if dataloader.num_workers or dataloader.pin_memory:
            self._workers_iter = iter(dataloader)
            return self._workers_iter
        return map(self._convert, self.dataset)

    def _pause_if_fruitless(self) -> None:
        """Before walking again for tasks back in the queue: a pause if the last walk found none
        free for this process (`REWALK_PAUSE_S_MIN`, doubled after each such walk up to
        `REWALK_PAUSE_S_MAX`), since a walk ends as soon as nothing is free."""
        if self._fruitless_walks:
            time.sleep(min(REWALK_PAUSE_S_MIN * 2 ** min(self._fruitless_walks - 1, 10), REWALK_PAUSE_S_MAX))

    def _lend_trainers(self) -> None:
        """With workers, registers their trainers here once (kept alive by this process's
        heartbeats) and lends them to the dataset the workers get: a new worker of each pass
        asks as the same trainers instead of registering its own, which would each be a write,
        and another once its lease ran out after the worker exited (and a task a stopped worker
        held comes back with the next pass's worker at once, not a lease later)."""
        workers = self.dataloader.num_workers
        if workers and not self._lent_clients:
            lent = {worker: [self.dataset.client(suffix) for suffix in self.dataset.worker_suffixes(worker)] for worker in range(workers)}
            self._lent_clients = [client for clients in lent.values() for client in clients]
            ids = iter(register_together(self._lent_clients))
            self._lent = {worker: [next(ids) for _client in clients] for worker, clients in lent.items()}
        if workers and self._carriage is None:
            context = self.dataloader.multiprocessing_context or multiprocessing.get_context()
            self._carriage = Carriage(workers, context)
        # This loader's, though another loader of the dataset lent its own since: those may
        # no longer be kept alive, or be in use by that loader's workers.
        self.dataset._lent = self._lent
        self.dataset._carriage = self._carriage

    def _return_trainers(self) -> None:
        """The job ended: the trainers lent to the workers stop heartbeating (the masters drop
        them a lease later)."""
        for client in self._lent_clients:
            client.close()
        self._lent_clients, self._lent = [], {}
        self.dataset._lent = self._lent

    def _job_status(self) -> dict:
        """The job as the leader sees it, with `ended` (finished or cancelled; failed tasks
        raise `TasksFailed`)."""
        self._flush_reports()
        client = self._reporter_client()
        if not self._job_reported:
            # The job exists once reported (the report submits it when none of its name does).
            # With `restart`, a job that ended gets a new incarnation here, in the process
            # that iterates, before any worker reports (theirs only join it).
            self.dataset._report(client, restart=self.dataset.restart)
            self._job_reported = True
            self.dataset._reported_by_loader = True
        status = raise_if_failed(client.status(lists=False))
        status["ended"] = bool(status["job_finished"] or status.get("job_cancelled"))
        self._warn_refused(cancelled=bool(status.get("job_cancelled")))
        if status["ended"]:
            self._return_trainers()
        if status["ended"] and not self._seen_running:
            raise JobEnded(status.get("job"), "been cancelled" if status.get("job_cancelled") else "finished")
        self._seen_running = True
        return status

    def _wait_for_pass_end(self, pass_index: int, vote=None) -> dict:
        """Waits until pass `pass_index` is over or the job ended (`over`), or until tasks of
        the pass are back in the queue for this process to take (`over` false). `vote`, given,
        makes every rank decide alike (DDP). The trainers another loader of the dataset lent
        its workers leave the job once that loader stopped iterating (`_release_stopped_loaders`):
        a loader iterated for a batch inside this one's loop (`next(iter(val_loader))`) stopped
        with its workers' tasks held, and the pass would wait for their timeouts."""
        pause = PASS_END_POLL_S / 8
        while True:
            self._release_stopped_loaders(waiting=True)
            status = self._job_status()
            over = status["ended"] or status["pass"] != pass_index
            waiting = not over and status["todo"] > 0
            if vote is not None:
                over, waiting = vote(over, waiting)
            if over or waiting:
                status["over"] = over
                return status
            # The pass usually ends at once (its last reports were this process's): look
            # again soon, then less often.
            time.sleep(pause)
            pause = min(pause * 2, PASS_END_POLL_S)

    def _consuming(self, holding: Receipt, dispatched_at: float) -> None:
        """The loop is about to consume a batch of task `holding`, asked for at
        `dispatched_at`: reports its progress once a third of the task timeout passed since then
        (at once, before the timeout is known), then every third of its timeout (from the
        reporting thread, in order with the finish reports). A task consumed within a third of
        its timeout sends none. Checked as a batch goes to the loop, not as it comes back: a
        task asked while the last one's batches ran is reported before the loop spends a step
        on its first batch."""
        now = time.monotonic()
        self._progress_if_due(holding, dispatched_at, now)
        if self._carriage is not None and now >= self._workers_held_look:
            self._progress_of_workers_tasks(self._carriage, now)

    def _progress_if_due(self, holding: Receipt, dispatched_at: float, now: float) -> None:
        """Queues a progress report of task `holding` (asked for at `dispatched_at`) if one is
        due: a third of the task timeout after it was asked for (at once, before the timeout is
        known), then as its last answer said."""
        if self._task_timeout_s is None and self._reports is not None and self._reports.progress_unanswered():
            # One report at a time learns the timeout: each other task's first report would be a
            # write too, and would send the finish held before it alone (reports go in order).
            # Looked at again at its next batch.
            return
        first_due = now if self._task_timeout_s is None else dispatched_at + self._task_timeout_s / 3
        if now < self._progress_due.setdefault(holding, first_due):
            return
        # Not due again until the answer says when.
        self._progress_due[holding] = float("inf")
        self._queue_report(("progress", holding))

    def _progress_of_workers_tasks(self, carriage: Carriage, now: float) -> None:
        """As the loop consumes a batch: the progress of the tasks the DataLoader workers took
        whose batches wait in the queue (`Carriage.held`), due as for the task consumed. A
        worker takes its next task once it yielded its last task's last batch, and that task's
        first batch reaches the loop only after every batch queued before it: longer than the
        task timeout for a slow enough loop. Looked at every sixth of the timeout (before it is
        known, every `WORKERS_HELD_LOOK_S`), so each is reported by half its timeout."""
        timeout_s = self._task_timeout_s
        self._workers_held_look = now + (WORKERS_HELD_LOOK_S if timeout_s is None else timeout_s / 6)
        if carriage.on:
            for holding, dispatched_at in carriage.held():
                self._progress_if_due(holding, dispatched_at, now)

    def _progressed(self, holding: Receipt, asked_at: float, timeout: Optional[float]) -> None:
        """The answer to a progress report: the task timeout, and when the next report is due
        if the task is still being consumed (never, when the task was taken back or the job
        cancelled: its finish report will say so)."""
        if timeout is None:
            return
        self._task_timeout_s = timeout if self._task_timeout_s is None else min(self._task_timeout_s, timeout)
        if self._reports is not None:
            self._reports.hold_at_most(self._task_timeout_s * HOLD_TIMEOUT_SHARE)
        self.progressed += 1
        if holding in self._progress_due:
            self._progress_due[holding] = asked_at + timeout / 3

    @property
    def job_finished(self) -> bool:
        """Whether the job finished, or was cancelled (a linearizable read through the
        leader): the training loop ends either way. A job that finished with failed tasks
        raises `raftrain.errors.TasksFailed` naming them and why, instead of ending the loop as
        if every sample had been trained on."""
        return self._job_status()["ended"]

    def _reporter_client(self) -> TaskClient:
        if self._reporter is None:
            self._reporter = self.dataset.client("reporter")
        return self._reporter

    def _report(self, task_id: int, dispatch: int, carry: Optional[Tuple[int, int]] = None) -> None:
        """Queues a task's finish report for the reporting thread (in order; the training loop
        goes on at once), offered to the next ask of the worker that read the task (`carry`:
        the worker and its number for the task)."""
        carriage = self._carriage
        if carry is not None and (carriage is None or not carriage.on or not carriage.consumed(*carry, (task_id, dispatch))):
            carry = None
        self._queue_report(("finish", (task_id, dispatch)), carry)

    def _queue_report(self, report: Tuple[str, Receipt], carry: Optional[Tuple[int, int]] = None) -> None:
        self._report_queue().put(report, carry)

    def _report_queue(self) -> Reports:
        """This loader's reports, made (and their thread started) on first use: a finish
        queued, or an ask ahead that carries those queued."""
        if self._reports is None:
            # This process's asks carry its finishes without workers, the workers' asks with
            # them: hold them for the next.
            hold_s = FINISH_HOLD_S if self.dataloader.num_workers == 0 else CARRY_HOLD_S
            self._reports = Reports(self._send_report, self._answered, hold_s)
        return self._reports

    def _send_report(self, kind: str, receipt: Receipt, carry: Optional[Tuple[int, int]] = None) -> None:
        """Sends one report (on the reporting thread) and takes its answer; a finish an ask of
        its worker carries is answered by that ask."""
        client = self._reporter_client()
        task_id, dispatch = receipt
        if kind == "finish":
            carriage = self._carriage
            mine = carry is None or carriage is None or carriage.take_over(*carry)
            if carry is not None and carriage is not None and not mine:
                carried = carriage.verdict(*carry)
                if carried is not None:
                    self.carried += 1
                    self._answered(task_id, dispatch, carried)
                    return
            accepted = client._native.finish(task_id, dispatch)
            # Sent here after its worker's ask took it and failed or died: a refusal may
            # answer the worker's own report, which may have landed.
            self._answered(task_id, dispatch, accepted if mine or accepted else None)
            return
        asked_at = time.monotonic()
        self._progressed(receipt, asked_at, client.progress(task_id, dispatch))

    def _reports_queued(self) -> int:
        return 0 if self._reports is None else self._reports.queued

    def _reports_landed(self, queued: Optional[int] = None) -> int:
        """Waits for the reports queued so far (or the first `queued`) to be answered; how many
        were answered."""
        return 0 if self._reports is None else self._reports.landed(queued)

    def _flush_reports(self) -> None:
        """Waits until every queued report was answered (raising the first that failed): the
        finishes carried by asks ahead once those are answered, and those queued by the
        dataset's other loaders. The registrations are the dataset's, so another loader (one
        made again after a loop stopped inside a task) consumed tasks they hold, and may still
        hold those finishes for an ask: an iteration forgets the tasks its registrations hold
        (`Registration.forget_held`), and the masters would hand such a task out again. Not
        those of another loader with workers that is iterating (suspended in this thread:
        `next(iter(val_loader))` inside its loop): its workers' asks carry its finishes, an
        ask's answer is taken by its worker's next step, which waits for that loop, and its
        workers ask as trainers of its own."""
        loaders = [self, *(other for other in self.dataset.loaders() if other is not self and not other._carrying_in_a_walk())]
        queues = [loader._reports for loader in loaders if loader._reports is not None]
        if queues:
            self.dataset._settle_asks()
        for reports in dict.fromkeys(queues):
            reports.flush()

    def _carrying_in_a_walk(self) -> bool:
        """Whether this loader is iterating with workers whose asks carry its finishes."""
        return self._iterating_in is not None and self._carriage is not None

    def _answered(self, task_id: int, dispatch: int, accepted: Optional[bool]) -> None:
        """A finish's answer (from the reporting thread or an ask's): a refusal is warned of
        by the training thread once it knows why (`_warn_refused`); `None`: not known (a
        finish sent twice)."""
        if accepted is None:
            return
        with self._counting:
            if accepted:
                self.finished += 1
                return
            self.refused += 1
            self._refusals.append((task_id, dispatch))

    def _warn_refused(self, cancelled: bool) -> None:
        """Warns of each finish refused since the last look: its task was taken back before it
        was consumed, and is trained again elsewhere; nothing when the job was `cancelled`
        (every report after the cancel is refused, and nothing is trained again)."""
        with self._counting:
            refusals, self._refusals = self._refusals, []
        if cancelled:
            return
        for task_id, dispatch in refusals:
            warnings.warn(f"task {task_id} (dispatch {dispatch}) was taken back before it was consumed; it is trained again elsewhere")


def _checkpoint_id(value: object) -> int:
    """A saved state's checkpoint id: a whole number of 64 bits (a NumPy one too, as a state
    passed through arrays may hold), never a string, float or bool."""
    try:
        if not isinstance(value, bool):
            checkpoint_id = operator.index(value)  # type: ignore[arg-type]
            if 0 <= checkpoint_id < CHECKPOINT_ID_END:
                return checkpoint_id
    except TypeError:
        pass
    raise InvalidArgument(f"raftrain_checkpoint: {value!r} is not a checkpoint id (the whole number state_dict() returned)")


class _DdpPasses:
    """`TaskLoader.ddp(model)`: one pass per iteration on every rank together."""

    def __init__(self, loader: TaskLoader, model: "Joinable"):
        import torch.distributed as dist
        from torch.distributed.algorithms.join import Joinable

        if not isinstance(model, Joinable):
            # A plain module has no join hook: `Join` would fail at the first pass, deep in torch.
            raise TypeError(
                f"ddp(model): a {type(model).__name__} is not joinable; pass the DistributedDataParallel "
                "wrapper the loop steps (DistributedDataParallel(module)), not the module inside it"
            )
        self.loader = loader
        self.model = model
        self._dist = dist

    @property
    def pass_index(self) -> Optional[int]:
        return self.loader.pass_index

    @property
    def job_finished(self) -> bool:
        """Whether the job ended, as every rank decides alike (any rank that sees it running
        keeps them all going: the others shadow its steps)."""
        return not self._max(not self.loader.job_finished)[0]

    def __iter__(self) -> Iterator[Any]:
        from torch.distributed.algorithms.join import Join

        self.loader._walked_on = None
        status = self.loader._job_status()
        if self._started_ended(status):
            self.loader.pass_index = None
            return
        self.loader.pass_index = status["pass"]
        self._share_out(status["todo"])
        while True:
            with Join([self.model]):
                yield from self.loader._batches()
            # The pass its batches were of (`_pass_moved_on`): the one read, unless a worker found it run.
            walked = self.loader.pass_index if self.loader.pass_index is not None else status["pass"]
            if self.loader._wait_for_pass_end(walked, vote=self._vote)["over"]:
                return
            self.loader._pause_if_fruitless()

    def _started_ended(self, status: dict) -> bool:
        """Whether the job ended on any rank (none then trains on); else every rank starts the
        same pass, or none trains on: averaging two passes' gradients would be silent. One
        `all_reduce` for both."""
        pass_index = status["pass"]
        ended, lowest_negated, highest = self._max(status["ended"], -pass_index, pass_index)
        if ended:
            return True
        lowest = -lowest_negated
        if lowest != highest:
            raise RuntimeError(
                f"rank {self._dist.get_rank()} walks pass {pass_index}, another rank pass "
                f"{lowest if lowest != pass_index else highest}: the ranks disagree on the pass"
            )
        return False

    def _share_out(self, todo: int) -> None:
        """Each rank asks ahead for no more than its share of the `todo` tasks it read at the
        pass's start: the ranks step together, so a pass takes as long as the rank with the
        most tasks, and a rank whose asks ahead took eight of the last tasks at once would leave
        the others shadowing its steps (with tasks of four batches, 64 batches against 36 a
        pass was seen). Past its share a rank still takes what is free, one ask at a time once
        its task is consumed."""
        world = self._dist.get_world_size()
        self.loader._pass_share = -(-todo // world) if world > 1 else None
        self.loader._taken_in_pass = 0

    def _vote(self, over: bool, waiting: bool) -> Tuple[bool, bool]:
        """The pass is over once any rank saw it over (a linearizable read: the pass only
        moves on); else tasks came back when any rank sees them, and every rank then takes
        part in one more joined iteration."""
        any_over, any_waiting = self._max(over, waiting)
        return bool(any_over), bool(any_waiting) and not any_over

    def _max(self, *values: int) -> List[int]:
        """Each of `values` (whole numbers or truth values) at its highest over the ranks: one
        `all_reduce`."""
        highest = torch.tensor([int(value) for value in values], dtype=torch.int64)
        self._dist.all_reduce(highest, op=self._dist.ReduceOp.MAX)
        return [int(value) for value in highest.tolist()]


class _BatchConverted:
    """The DataLoader's conversion of each item (its `collate_fn`: the trainer's, or PyTorch's
    `default_convert`, which makes NumPy arrays tensors) applied to the batch the dataset
    yields, never to the receipts and times it carries along (which that conversion would walk
    element by element at every batch). A class, not a closure: spawned workers unpickle it."""

    def __init__(self, convert: Callable[[object], object]):
        self.convert = convert

    def __call__(self, item: Item) -> Item:
        batch, receipts, holding, dispatched_at, carry, pass_index = item
        return self.convert(batch), receipts, holding, dispatched_at, carry, pass_index
