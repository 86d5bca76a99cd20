"""`TaskDataset` and `TaskLoader`: a raftrain job's tasks as PyTorch data, for any number of
DataLoader workers and training processes. Importing `raftrain` does not import this module
(nor PyTorch).

How it works
------------
Each DataLoader worker (or the training process itself with `num_workers=0`) is a trainer of
the job: it registers with the masters (three times: see below), takes tasks, reads each task's
samples (`read(start, end)` over an index task's range, or the RecordIO task's checked
chunks) and yields them in batches. Batches never span two tasks: a task's last batch may be
short. The batch holding a task's last sample carries a *receipt* (task id, dispatch).

`TaskLoader` wraps `DataLoader(dataset, batch_size=None, ...)` in the training process. It
yields the batches alone and reports a task finished when the training loop asks for the batch
after the one carrying the task's receipt: the loop body has then run on every sample of the
task. So, with any `num_workers` and `prefetch_factor`:

- a task is reported finished exactly when the training loop has consumed all its samples,
  by the training process (not the worker, which may be several batches ahead);
- prefetched batches of tasks not yet consumed are not reported; if the process dies they are
  lost with it, and their tasks go back to the queue when the workers' trainer leases end (the
  workers die with their DataLoader): each task is trained on at least once per pass;
- a worker holds at most three unreported tasks (one per registration): the master hands a
  trainer one task at a time (and answers one that holds a task with that task until its
  report is in), so the other registrations let a worker read ahead while its previous
  tasks' last batches wait in the prefetch queue or their reports are on their way; without
  workers, by a task's last batch (sooner once the batches left are expected to take the loop
  less than `ASK_AHEAD_S`: a share of the task timeout once known, at most
  `ASK_AHEAD_S_MAX`), the registration that took its task longest ago asks for its next task
  on a thread of its own, once that task's finish report is answered, so the hand-off does
  not wait for the masters; a second is asked ahead only while the task asked would wait less
  than that time (no sooner: a task's deadline runs from its dispatch; workers' asks already
  overlap the training loop);
- the finish reports are sent in order by a thread of the training process, so the loop never
  waits for the masters to take one; the loader waits for them before it reads the job's
  state (`job_finished`, the end of a pass, `state_dict`), and the dataset, without workers,
  before it asks again for a task the master answered as still held (the pass's last);
- a task the training loop is consuming slowly is not taken back: the training process
  reports its progress (`Task.progress`), which moves the task's deadline a whole timeout on
  (`--task-timeout-min-ms`, 20 s by default, or more for tasks slow on average), once a
  third of the task timeout passed since the task was asked for (after the task's first
  batch, until a progress answer told the loader the timeout), and again every third of
  that timeout while batches of it are consumed; a task consumed sooner sends none, and only
  a stuck or dead loop loses its tasks. A task's batches waiting in
  the prefetch queue are not reported yet: the loop must reach a task's first batch within the
  timeout of its dispatch (a prefetch queue of `num_workers x prefetch_factor` batches ahead
  of the loop). A task taken back anyway is refused when reported (counted in
  `TaskLoader.refused`, and warned) and trained again elsewhere.

One iteration of a `TaskLoader` is exactly one pass of the job, and `loader.pass_index` says
which: after the batches this process gets of the pass (its workers stop asking once the pass
is over, or once nothing has been free for them for `PASS_END_IDLE_S`: the pass's last tasks
are held by other processes), the iteration waits until the master's pass is over, taking
tasks that come back to the queue meanwhile; it yields nothing only when the job has ended.
The master starts the next pass only when every task of this one is finished, so a training
loop is

    while not loader.job_finished:
        for features, labels in loader:
            ...
        evaluate(loader.pass_index)

Lightning and accelerate drive a `TaskLoader` as it is (`python/tests/test_lightning.py`): it
has `state_dict()`/`load_state_dict()` (Lightning saves the first in its checkpoints and calls
the second on resume), `set_epoch` (recorded only: the passes are the job's) and no length
(`len()` raises `TypeError`, so Lightning iterates each pass to its end); accelerate's `prepare`
returns it untouched. Lightning asks for the next batch before it runs the step on the current
one, so under it a task is reported when its last batch goes to the step, not after the step:
a checkpoint Lightning takes after a step still counts done exactly the tasks the saved model
trained whole, and a resume from it trains the task part-way through then again, whole.

Several training processes (torchrun): each makes its own `TaskDataset` and `TaskLoader`; the
master spreads tasks among all their workers, so processes get different numbers of batches in
a pass. With DistributedDataParallel iterate `loader.ddp(model)` instead: every rank iterates
the same pass together; a rank whose batches ran out shadows the others' steps (`Join`) rather
than blocking their all-reduce, the ranks wait together for the pass to end (taking part
together in any tasks that come back), they check that they walk the same pass (a rank that
does not raises rather than averaging two passes' gradients), and `job_finished` is decided
alike on every rank: see `python/tests/torch_training.py`.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from ._torch_io import Receipt, Registration, Reports
from .errors import DataError, InvalidArgument, JobEnded
from .task_client import DEADLINE_S_DEFAULT, Masters, StepKind, TaskClient, Waiting, master_list, raise_if_failed

#: Registrations per worker: one task being consumed by the training loop, one read or asked
#: ahead, and one whose finish report is on its way (the master answers a trainer that holds a
#: task with that task until the report is in, so with two the next ask often waited for it).
REGISTRATIONS_PER_WORKER = 3
#: Between asks while nothing is free for a worker (every registration holds an unreported
#: task, or the pass's last tasks are held): the first pause, doubled after each fruitless
#: round up to the longest (each round is a replicated write per registration; the pass's
#: last finish usually lands within the first pauses).
HELD_POLL_S_MIN = 0.005
HELD_POLL_S = 0.05
#: A worker ends its pass once nothing was free for it this long: the pass's last tasks are
#: held elsewhere (by another process's workers, which may wait in DDP for this one).
PASS_END_IDLE_S = 1.0
#: How long before a task's batches are expected to run out the next task is asked for (in the
#: training process, without workers), before the loader learned the job's task timeout:
#: enough to hide a task hand-off, short enough that a task's deadline, which runs from its
#: dispatch, is not spent waiting.
ASK_AHEAD_S = 0.02
#: Once the timeout is known (from a progress report's answer): asked this share of it ahead,
#: at most `ASK_AHEAD_S_MAX` (tasks shorter than that are asked for as the previous one starts).
ASK_AHEAD_TIMEOUT_SHARE = 0.05
ASK_AHEAD_S_MAX = 0.25
#: The longest pause between looks at the master (a linearizable read) while this process waits
#: for the pass's other tasks to finish (the first looks come sooner): short, because the
#: process that finishes the pass starts the next at once, and one that noticed later than
#: the next pass took to run would find it over and miss it.
PASS_END_POLL_S = 0.05


class TaskDataset(IterableDataset):
    """A job's tasks as an IterableDataset of `(batch, receipts, holding, asked_at)`
    (`holding`: the receipt of the task the batch is of; `asked_at`: when it was asked for, by
    `time.monotonic()`); use it through `loader()`.

    Either `index=(name, size, shard_size)` with `read`: an index dataset the masters never
    read (tasks are ranges of `shard_size` indices of `[0, size)`), each batch being
    `read(start, end)` for a range of at most `batch_size` indices of a task;
    or `records`: the job's RecordIO files (paths or globs, as the masters see them) of dense
    `Example`s, each batch `(features float32 [n, d], labels [n])` as tensors, the labels of
    `label_dtype` (`torch.int64` by default: class ids, as `cross_entropy` takes them; a label
    that is not a whole number raises `raftrain.DataError` naming the task and the value: pass
    `label_dtype=torch.float32` for regression), or `transform(features, labels)` of those
    NumPy arrays (labels as stored, float32).

    `shuffle=True` shuffles the job with `seed` (the same seed, the same orders): the masters
    hand each pass's tasks out in a permutation of (seed, pass), replicated so a failover or
    a restore replays it, and each task's samples are read in a permutation of (seed, pass,
    task), the same in every process, DataLoader worker and start method. A shuffled index
    dataset reads its batches with `read_indices(indices)` (a list of the batch's indices, in
    the shuffled order) instead of `read(start, end)`. The seed is part of the job: a report
    with another one is refused naming both.

    `policy` (a dict of `TaskClient.submit_job`'s queue policy keys, e.g.
    `{"task_timeout_min_ms": 120000, "max_task_failures": 3}`) submits the job with those
    values instead of the masters' flags; without it the job is reported under the flags.
    """

    def __init__(
        self,
        masters: Masters,
        *,
        index: Optional[Tuple[str, int, int]] = None,
        read: Optional[Callable[[int, int], object]] = None,
        records: Optional[Sequence[str]] = None,
        passes: int = 1,
        batch_size: int = 64,
        job: Optional[str] = None,
        transform: Optional[Callable[[np.ndarray, np.ndarray], object]] = None,
        name: Optional[str] = None,
        tls_ca=None,
        tls_cert=None,
        tls_key=None,
        token_file=None,
        deadline_s: Optional[float] = DEADLINE_S_DEFAULT,
        policy: Optional[dict] = None,
        label_dtype: torch.dtype = torch.int64,
        restart: bool = False,
        shuffle: bool = False,
        seed: int = 0,
        read_indices: Optional[Callable[[List[int]], object]] = None,
    ):
        super().__init__()
        if batch_size < 1:
            raise InvalidArgument("batch_size must be at least 1")
        if (index is None) == (records is None):
            raise InvalidArgument("give either index=(name, size, shard_size) with read, or records")
        if index is not None and read is None and read_indices is None:
            raise InvalidArgument("an index dataset needs read(start, end) -> batch")
        if index is not None and shuffle and read_indices is None:
            raise InvalidArgument("a shuffled index dataset needs read_indices(indices) -> batch (its samples come in a seeded order)")
        if index is not None and job is not None and job != str(index[0]):
            raise InvalidArgument(f"index=({index[0]!r}, ...) names the job, and job={job!r} another: give one")
        self.masters = master_list(masters)
        self.index = None if index is None else (str(index[0]), int(index[1]), int(index[2]))
        self.read = read
        self.read_indices = read_indices
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        if isinstance(records, (str, os.PathLike)):
            records = [records]
        self.records = None if records is None else [os.fspath(pattern) for pattern in records]
        self.passes = int(passes)
        self.batch_size = int(batch_size)
        self.job = job
        self.transform = transform
        self.label_dtype = label_dtype
        self.policy = dict(policy) if policy else None
        self.restart = bool(restart)
        self.name = name or f"torch-{socket.gethostname()}-{os.getpid()}"
        self.client_options = dict(tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key, token_file=token_file, deadline_s=deadline_s)
        self._registered: List[Registration] = []
        # How long the training loop takes per batch (smoothed; for asking ahead).
        self._batch_seconds = float("inf")
        self._registered_pid: Optional[int] = None
        # The loader iterating this dataset in its own process (no workers): its reports tell
        # a registration when its last task's finish is in, and its answers the task timeout.
        self._loader: Optional["TaskLoader"] = None

    def client(self, suffix: str) -> TaskClient:
        """A client of this job, registered as `<name>-<suffix>`."""
        job = self.index[0] if self.index is not None else (self.job or "python")
        return TaskClient(self.masters, name=f"{self.name}-{suffix}", job=job, **self.client_options)

    def __getstate__(self) -> dict:
        # Registrations belong to the process that made them (a spawned worker makes its own).
        state = dict(self.__dict__)
        state["_registered"], state["_registered_pid"], state["_loader"] = [], None, None
        return state

    def loader(self, *, allow_ended: bool = False, **dataloader_options) -> "TaskLoader":
        """A `TaskLoader` over this dataset (DataLoader options: num_workers, prefetch_factor,
        pin_memory, ...; batching is this dataset's). A job that had already ended when the
        loader first looks raises `raftrain.JobEnded` (a script run again after its job
        finished would otherwise train nothing and succeed); `allow_ended=True` makes that an
        empty loop instead."""
        return TaskLoader(self, allow_ended=allow_ended, **dataloader_options)

    def __iter__(self) -> Iterator[Tuple[object, List[Receipt], Receipt, float]]:
        """One pass as this worker sees it: tasks until the pass is over after it yielded
        some, or until nothing is free for `PASS_END_IDLE_S` (the rest are held elsewhere), or
        the job finished. Each registration walks the passes with the client's walker; when one
        learns the pass moved, the others are moved with it."""
        registrations = self._registrations()
        loader = self._loader if get_worker_info() is None else None
        self._report(registrations[0].client)
        pass_index = registrations[0].client.pass_index
        yielded = False
        idle_since: Optional[float] = None
        landed, pause = -1, HELD_POLL_S_MIN
        # The registration whose task the loop is consuming (or consumed last).
        current: Optional[Registration] = None
        while True:
            steps = []
            # Registrations whose next step was asked ahead answer first, in the order asked.
            for registration in sorted(registrations, key=Registration.ask_order, reverse=True):
                step = registration.step()
                steps.append((registration, step))
                if step.kind != StepKind.Wait and not registration.holds(step):
                    break
            if step.kind in (StepKind.Finished, StepKind.Cancelled):
                return
            if step.kind in (StepKind.PassOver, StepKind.PassRewound):
                if step.kind == StepKind.PassOver and step.pass_index > pass_index and yielded:
                    return
                pass_index = step.pass_index
                for other in registrations:
                    other.go_to(pass_index)
                continue
            if step.kind == StepKind.Task and not registration.holds(step):
                dispatched_at = registration.asked_since or time.monotonic()
                if loader is not None and current is not None:
                    # The loop consumed the last task: its finish report is queued.
                    current.reported_upto = loader._reports_queued()
                registration.take(step)
                current = registration
                # In the training process itself (no DataLoader workers), while this task's last
                # batches are consumed, another registration asks for its next task (no sooner:
                # a task's deadline runs from its dispatch), once its last report is in.
                # Workers do not: their asks already overlap the training loop, and a worker
                # holding tasks ahead makes the DataLoader, which takes batches from its workers
                # in turn, wait on the others.
                others = [other for other in registrations if other is not registration]
                ask_ahead = (lambda left, count: self._ask_ahead(others, loader, left, count)) if loader is not None else (lambda left, count: None)
                yield from self._batches(step.task, ask_ahead, dispatched_at)
                yielded, idle_since, pause = True, None, HELD_POLL_S_MIN
                continue
            if loader is not None and any(asker.holds(each) for asker, each in steps):
                # A registration was answered the task this process is reporting (the pass's
                # last, usually): ask again once the reports are in, rather than after a pause.
                answered = loader._reports_landed()
                if answered != landed:
                    landed = answered
                    continue
            idle_since = idle_since or time.monotonic()
            waiting_for_dataset = all(each.waiting_for == Waiting.NO_DATASET for _asker, each in steps)
            if not waiting_for_dataset and time.monotonic() - idle_since >= PASS_END_IDLE_S:
                return
            time.sleep(pause)
            pause = min(pause * 2, HELD_POLL_S)

    def _report(self, client: TaskClient, restart: bool = False) -> None:
        """Reports the job's dataset (the first report wins; repeats are answered alike), or
        submits it with `policy`; `restart` (a loader's first report only, never a worker's)
        trains a job that ended again, as a new incarnation."""
        if self.policy is not None or restart:
            name = self.index[0] if self.index is not None else (self.job or "python")
            index = None if self.index is None else self.index[1:]
            policy = self.policy or {}
            shuffled = dict(shuffle=self.shuffle, seed=self.seed)
            client.submit_job(name, passes=self.passes, records=self.records, index=index, restart=restart, **shuffled, **policy)
        elif self.index is not None:
            name, size, shard_size = self.index
            client.report_index_dataset(name, size, shard_size, passes=self.passes, shuffle=self.shuffle, seed=self.seed)
        else:
            client.report_dataset(self.records, passes=self.passes, job=self.job, shuffle=self.shuffle, seed=self.seed)

    def _registrations(self) -> "List[Registration]":
        """This process's registrations, made on first use and kept for later passes: a worker
        keeps heartbeating until it exits, so a task it yielded stays its own until the
        training loop reports it."""
        if self._registered_pid != os.getpid():
            worker = get_worker_info()
            worker_name = f"w{worker.id}" if worker is not None else "main"
            self._registered = [
                Registration(self.client(f"{worker_name}-{index}")) for index in range(REGISTRATIONS_PER_WORKER)
            ]
            self._registered_pid = os.getpid()
        return self._registered

    def _batches(self, task, ask_ahead: Callable[[int, int], object], dispatched_at: float) -> Iterator[Tuple[object, List[Receipt], Receipt, float]]:
        """The task's batches, each with the receipts it carries, the task it is of and when
        it was asked for (`time.monotonic()`, the same clock in every process of the machine:
        no later than its dispatch). `ask_ahead(left, count)` runs before each batch is yielded
        (`left` of the task's `count` batches, this one included)."""
        receipt = (task.task_id, task.dispatch)
        # A shuffled job's samples come in the task's seeded order (offsets into the task).
        order = task.sample_order()
        if task.start is not None and (order is not None or self.read is None):
            ranges, batches = self._index_batches(task, order)
        elif task.start is not None:
            ranges = [(start, min(start + self.batch_size, task.end)) for start in range(task.start, task.end, self.batch_size)]
            batches = (self.read(start, end) for start, end in ranges)
        else:
            features, labels = task.arrays()
            if order is not None:
                features, labels = features[order], labels[order]
            if self.transform is None:
                labels = _labels_as(labels, self.label_dtype, task.task_id)
            count = len(labels)
            ranges = [(start, min(start + self.batch_size, count)) for start in range(0, count, self.batch_size)] or [(0, 0)]
            batches = (self._batch(features[start:end], labels[start:end]) for start, end in ranges)
        for left, batch in zip(range(len(ranges), 0, -1), batches):
            ask_ahead(left, len(ranges))
            yielded_at = time.monotonic()
            yield batch, [receipt] if left == 1 else [], receipt, dispatched_at
            # The loop asked for the next batch: how long one takes it, smoothed.
            took = time.monotonic() - yielded_at
            self._batch_seconds = took if self._batch_seconds == float("inf") else self._batch_seconds + (took - self._batch_seconds) / 8

    def _ask_ahead(self, registrations: List[Registration], loader: "TaskLoader", left: int, count: int) -> None:
        """Asks one of `registrations` for its next step on a thread, in the training process,
        while `left` of the current task's `count` batches are still to be consumed: one task
        ahead before the task's last batch, and more while the task asked would wait (the
        batches left, then the tasks asked ahead before it, at the loop's pace) no longer than
        the ask-ahead time (`_ask_ahead_s`): its deadline runs meanwhile. The registration that
        took its task longest ago asks, once that task's finish report is answered (else the
        master would answer that task again), which it usually is already."""
        free = [registration for registration in registrations if not registration.ask_order()[0]]
        if not free:
            return
        ahead = len(registrations) - len(free)
        waits_s = (left + ahead * count) * self._batch_seconds
        if (ahead > 0 or left > 1) and not waits_s <= self._ask_ahead_s():
            return
        registration = min(free, key=Registration.taken)
        upto = registration.reported_upto if registration.reported_upto is not None else loader._reports_queued()
        registration.ask_ahead(lambda: loader._reports_landed(upto))

    def _ask_ahead_s(self) -> float:
        """How long before a task's batches run out the next is asked for: `ASK_AHEAD_S`
        until the loader learned the task timeout, then a share of it (the asked task's
        deadline runs meanwhile), at most `ASK_AHEAD_S_MAX`."""
        timeout_s = None if self._loader is None else self._loader._task_timeout_s
        if timeout_s is None:
            return ASK_AHEAD_S
        return min(ASK_AHEAD_S_MAX, timeout_s * ASK_AHEAD_TIMEOUT_SHARE)

    def _index_batches(self, task, order: Optional[List[int]]):
        """An index task's batches through `read_indices`, in `order` (offsets into the task)
        or in index order."""
        if self.read_indices is None:
            raise InvalidArgument(f"task {task.task_id} of a shuffled job: give read_indices(indices) -> batch to read it")
        indices = [task.start + offset for offset in order] if order is not None else list(range(task.start, task.end))
        ranges = [(start, min(start + self.batch_size, len(indices))) for start in range(0, len(indices), self.batch_size)]
        return ranges, (self.read_indices(indices[start:end]) for start, end in ranges)

    def _batch(self, features: np.ndarray, labels: np.ndarray):
        if self.transform is not None:
            return self.transform(features, labels)
        return torch.from_numpy(np.array(features)), labels


def _labels_as(labels: np.ndarray, dtype: torch.dtype, task_id: int) -> torch.Tensor:
    """A task's stored (float32) labels as a tensor of `dtype`; refused when an integer dtype
    would change a label (a regression target read as a class id)."""
    converted = torch.from_numpy(np.array(labels)).to(dtype)
    if not dtype.is_floating_point:
        changed = np.flatnonzero(converted.numpy() != labels)
        if len(changed):
            value = float(labels[changed[0]])
            raise DataError(
                f"task {task_id}: label {value:g} (record {changed[0]} of the task) is not a class id: "
                f"pass label_dtype=torch.float32 for real-valued labels"
            )
    return converted


class TaskLoader:
    """Iterates a `TaskDataset` through a DataLoader, exactly one pass of the job per iteration
    (`pass_index` says which), and reports each task finished once the training loop has
    consumed its last batch (see the module's documentation). Loop
    `while not loader.job_finished: for batch in loader: ...`; with DistributedDataParallel,
    iterate `loader.ddp(model)` instead."""

    def __init__(self, dataset: TaskDataset, *, allow_ended: bool = False, **dataloader_options):
        if dataloader_options.pop("batch_size", None) is not None:
            raise ValueError("TaskDataset batches itself: give batch_size to the TaskDataset")
        self.dataset = dataset
        self.dataloader = DataLoader(dataset, batch_size=None, **dataloader_options)
        # Iterated in this process (no workers), the dataset asks ahead once these reports land.
        dataset._loader = self
        #: Tasks this loader reported finished, and reports the master refused (taken back).
        self.finished = 0
        self.refused = 0
        #: Progress reports that moved a task's deadline on.
        self.progressed = 0
        #: The pass the last iteration walked (`None` before the first).
        self.pass_index: Optional[int] = None
        #: The last epoch a trainer gave `set_epoch` (`None` before any).
        self.epoch: Optional[int] = None
        self._reporter: Optional[TaskClient] = None
        self._reports: Optional[Reports] = None
        self._job_reported = False
        # Whether the job was seen running: a job that had ended before raises `JobEnded`
        # (unless `allow_ended`), rather than letting a script train nothing and succeed.
        self._seen_running = allow_ended
        # Per task being consumed: when its progress is due next (infinity: no longer held).
        self._progress_due: Dict[Receipt, float] = {}
        # The shortest task timeout a progress report was answered with (`None` before one):
        # a task's first progress report is due a third of it after the task was asked for.
        self._task_timeout_s: Optional[float] = None

    def __iter__(self) -> Iterator[object]:
        """One pass: the batches this process gets of it, then a wait until the pass is over
        (its last tasks may be held by other processes; tasks that come back to the queue
        meanwhile are taken here too). Nothing when the job has ended."""
        status = self._job_status()
        self.pass_index = None if status["ended"] else status["pass"]
        while self.pass_index is not None:
            yield from self._batches()
            status = self._wait_for_pass_end(self.pass_index)
            if status["over"]:
                return

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

    def state_dict(self) -> dict:
        """What resumes this job's data where it is now (torchdata's `StatefulDataLoader`
        protocol): records a progress checkpoint through the masters (the pass and which tasks
        are done, one replicated entry; the job's pservers record theirs under its id) and
        returns its id with the pass. Save it with the model's state."""
        self._job_status()  # the job exists (reported) and runs
        checkpoint_id = self._reporter_client().checkpoint()
        return {"raftrain_checkpoint": checkpoint_id, "job": self._reporter_client().job, "pass_index": self.pass_index}

    def load_state_dict(self, state: dict) -> None:
        """Puts the job back to `state` (from `state_dict()`): the tasks done after it are
        done again, at least once, and a job with pservers gets its model back from their
        checkpoints first. With several training processes, one of them restores (rank 0);
        the others just go on iterating."""
        if "raftrain_checkpoint" not in state:
            raise InvalidArgument(f"not a TaskLoader state (no raftrain_checkpoint key): {sorted(state)}")
        restored = self._reporter_client().restore(int(state["raftrain_checkpoint"]))
        self.pass_index = restored["pass_index"]

    def ddp(self, model: torch.nn.Module) -> "_DdpPasses":
        """This loader for DistributedDataParallel: each iteration is one pass on every rank
        together. A rank whose batches of the pass ran out shadows the others' steps
        (`torch.distributed.algorithms.Join` over `model`) instead of blocking them, the ranks
        then wait together for the pass to end, and they check that they walk the same pass
        (a `RuntimeError` names a rank that does not, rather than averaging gradients of two
        passes). Loop `while not passes.job_finished: for batch in passes: ...`."""
        return _DdpPasses(self, model)

    def _batches(self) -> Iterator[object]:
        """The DataLoader's batches of this process, reporting each task as it is consumed."""
        self._progress_due.clear()
        for batch, receipts, holding, dispatched_at in self.dataloader:
            yield batch
            # The loop asked for the next batch: it has consumed this one.
            self._consumed((int(holding[0]), int(holding[1])), bool(receipts), float(dispatched_at))
            for task_id, dispatch in receipts:
                self._progress_due.pop((int(task_id), int(dispatch)), None)
                self._report(int(task_id), int(dispatch))

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
        status = raise_if_failed(client.status())
        status["ended"] = bool(status["job_finished"] or status.get("job_cancelled"))
        if status["ended"] and not self._seen_running:
            raise JobEnded(status.get("job"), "been cancelled" if status.get("job_cancelled") else "finished")
        self._seen_running = True
        return status

    def _wait_for_pass_end(self, pass_index: int, vote=None) -> dict:
        """Waits until pass `pass_index` is over or the job ended (`over`), or until tasks of
        the pass are back in the queue for this process to take (`over` false). `vote`, given,
        makes every rank decide alike (DDP)."""
        pause = PASS_END_POLL_S / 8
        while True:
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

    def _consumed(self, holding: Receipt, finishing: bool, dispatched_at: float) -> None:
        """The loop consumed a batch of task `holding` (its last when `finishing`), asked for
        at `dispatched_at`: reports its progress a third of the task timeout after that (after
        its first batch, before the timeout is known), then every third of its timeout (from
        the reporting thread, in order with the finish reports). A task consumed within a
        third of its timeout sends none."""
        now = time.monotonic()
        first_due = now if self._task_timeout_s is None else dispatched_at + self._task_timeout_s / 3
        if finishing or now < self._progress_due.setdefault(holding, first_due):
            return
        # Not due again until the answer says when.
        self._progress_due[holding] = float("inf")
        self._queue_report(("progress", holding))

    def _progressed(self, holding: Receipt, asked_at: float, timeout: Optional[float]) -> None:
        """The answer to a progress report: the task timeout, and when the next report is due
        if the task is still being consumed (never, when the task was taken back or the job
        cancelled: its finish report will say so)."""
        if timeout is None:
            return
        self._task_timeout_s = timeout if self._task_timeout_s is None else min(self._task_timeout_s, timeout)
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

    def _report(self, task_id: int, dispatch: int) -> None:
        """Queues a task's finish report for the reporting thread (in order; the training loop
        goes on at once)."""
        self._queue_report(("finish", (task_id, dispatch)))

    def _queue_report(self, report: Tuple[str, Receipt]) -> None:
        if self._reports is None:
            self._reports = Reports(self._send_report)
        self._reports.put(report)

    def _send_report(self, kind: str, receipt: Receipt) -> None:
        """Sends one report (on the reporting thread) and takes its answer."""
        client = self._reporter_client()
        task_id, dispatch = receipt
        if kind == "finish":
            self._answered(task_id, dispatch, client._native.finish(task_id, dispatch))
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
        """Waits until every queued report was answered (raising the first that failed)."""
        if self._reports is not None:
            self._reports.flush()

    def _answered(self, task_id: int, dispatch: int, accepted: bool) -> None:
        if accepted:
            self.finished += 1
            return
        self.refused += 1
        warnings.warn(
            f"task {task_id} (dispatch {dispatch}) was taken back before it was consumed; it is trained again elsewhere"
        )


class _DdpPasses:
    """`TaskLoader.ddp(model)`: one pass per iteration on every rank together."""

    def __init__(self, loader: TaskLoader, model: torch.nn.Module):
        import torch.distributed as dist

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
        return not self._any(not self.loader.job_finished)

    def __iter__(self) -> Iterator[object]:
        from torch.distributed.algorithms.join import Join

        status = self.loader._job_status()
        if self._any(status["ended"]):
            self.loader.pass_index = None
            return
        self._agree(status["pass"])
        self.loader.pass_index = status["pass"]
        while True:
            with Join([self.model]):
                yield from self.loader._batches()
            if self.loader._wait_for_pass_end(status["pass"], vote=self._vote)["over"]:
                return

    def _agree(self, pass_index: int) -> None:
        """Every rank starts the same pass, or none trains on: averaging two passes' gradients
        would be silent."""
        lowest, highest = torch.tensor([pass_index]), torch.tensor([pass_index])
        self._dist.all_reduce(lowest, op=self._dist.ReduceOp.MIN)
        self._dist.all_reduce(highest, op=self._dist.ReduceOp.MAX)
        if lowest.item() != highest.item():
            raise RuntimeError(
                f"rank {self._dist.get_rank()} walks pass {pass_index}, another rank pass "
                f"{lowest.item() if lowest.item() != pass_index else highest.item()}: the ranks disagree on the pass"
            )

    def _vote(self, over: bool, waiting: bool) -> Tuple[bool, bool]:
        """The pass is over once any rank saw it over (a linearizable read: the pass only
        moves on); else tasks came back when any rank sees them, and every rank then takes
        part in one more joined iteration."""
        over = self._any(over)
        return over, self._any(waiting) and not over

    def _any(self, flag: bool) -> bool:
        value = torch.tensor([1 if flag else 0])
        self._dist.all_reduce(value, op=self._dist.ReduceOp.MAX)
        return bool(value.item())
