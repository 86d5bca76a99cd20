"""`TaskDataset` and `TaskLoader`: a raftrain job's tasks as PyTorch data, for any number of
DataLoader workers and training processes. Importing `raftrain` does not import this module
(nor PyTorch).

How it works
------------
Each DataLoader worker (or the training process itself with `num_workers=0`) is a trainer of
the job several times over (nine times without workers, eight times a worker; see below): the training process registers its workers' trainers
once and keeps them alive, and each worker (a new process each pass unless
`persistent_workers`) asks as the ones lent to it. It takes tasks, reads each task's
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
  lost with it, and their tasks go back to the queue when its trainers' leases end (the
  workers die with their DataLoader): each task is trained on at least once per pass;
- a worker holds at most eight unreported tasks (one per registration): the master hands a
  trainer one task at a time (and answers one that holds a task with that task until its
  report is in), so the other registrations let a worker read ahead while its previous
  tasks' last batches wait in the prefetch queue or their reports are on their way; a worker
  that needs a task asks for as many as its registrations whose tasks were consumed, up to
  four (`WORKER_ASKS_TOGETHER`), at once, each ask carrying its registration's last finish
  and saying so (`step_ahead(together=...)`, below): one replicated entry for them all; without
  workers, once a task's batches left are expected to take the loop less than `ASK_AHEAD_S`
  (a share of the task timeout once known, at most `ASK_AHEAD_S_MAX`; a loop slower than
  that asks as it needs the task), the registration that took its task longest ago asks for its next task
  in the background (`TaskClient.step_ahead`: no Python thread waits for the answer, so none
  interrupts the training thread), once that task's finish report is sent or carried by an
  ask, so the hand-off does not wait for the masters; others are asked ahead only while the
  tasks asked would wait less than that time (no sooner: a task's deadline runs from its
  dispatch; workers' asks already overlap the training loop). They ask once no task asked
  ahead is still to come, as many as may (up to eight of its `REGISTRATIONS_OF_THE_LOOP`) at
  once, each carrying its own last finish, saying so (`step_ahead(together=...)`): the leader
  writes them as one entry, one disk sync on each master for eight tasks (a DDP rank, in
  `loader.ddp(model)`, asks ahead for no more than its share of the tasks the pass had at its
  start: the ranks step together, so one holding several tasks more than the others would
  have them shadow its steps; past its share it takes what is free one task at a time). The masters apply
  them in the order they arrive, so the loop takes their tasks in the pass's order
  (`Task.pass_rank`: a shuffled pass stays seeded);
- the finish reports are sent in order by a thread of the training process, so the loop never
  waits for the masters to take one; the loader waits for them before it reads the job's
  state (`job_finished`, the end of a pass, `state_dict`), and the dataset, without workers,
  before it asks again for a task the master answered as still held (the pass's last);
  without workers, a finish waits up to `FINISH_HOLD_S` for the process's next ask, which
  carries it (one replicated write for the finish and the ask: `TaskClient.step(finished=...)`);
  with workers, up to `CARRY_HOLD_S` for the next ask of the worker that read the task, to
  which the training process hands it through shared memory (`Carriage`: exactly one of them
  sends it; a worker whose ask failed or that died leaves it to the training process); a
  worker asks as a registration whose task the loop has not consumed yet only once it has
  (the master would answer that task again);
- a task the training loop is consuming slowly is not taken back: the training process
  reports its progress (`Task.progress`), which moves the task's deadline a whole timeout on
  (`--task-timeout-min-ms`, 20 s by default, or more for tasks slow on average), once a
  third of the task timeout passed since the task was asked for (checked as each of its
  batches goes to the loop; at its first batch, until a progress answer told the loader the
  timeout), and again every third of that timeout while batches of it are consumed; a task
  consumed sooner sends none, and only
  a stuck or dead loop loses its tasks. The tasks the DataLoader workers took whose batches
  wait in the prefetch queue (a worker takes its next task as soon as it yielded its last
  task's last batch) are reported alike, by the training process as the loop consumes
  batches, from what each worker records in shared memory as it takes a task
  (`Carriage.held`). A task taken back anyway is refused when reported (counted in
  `TaskLoader.refused`, and warned of once the loader knows the job was not cancelled: after
  a cancel every report is refused and nothing is trained again) and trained again elsewhere;
- a task whose data cannot be read (a `read` that raises, a corrupt RecordIO chunk) is
  reported failed as the error propagates to the loop (`Task.fail`, spending the task's
  failure budget, `max_task_failures`): iterated again, the loader gets it again until the
  budget is spent, and the job then ends with it failed (`job_finished` raises `TasksFailed`
  naming it and the error), rather than handing it to this process for ever;
- a loop that stops inside a task (a `break`, an exception) did not consume it: the next
  iteration of that process gets it again, whole, from the masters at once (its workers ask
  as the same trainers as the stopped ones), and none of the tasks the loop consumed. So does
  a new loader of the same dataset (a notebook cell run again, a loader made each pass): it
  first sends the finishes the other loaders still hold, and the trainers a stopped loader
  lent its workers leave the job (`TaskClient.leave`), so the tasks those workers took go back
  to the queue at once rather than at their timeout (workers that persist keep their trainers
  until the new loader waits for its pass's end while they hold tasks their loop did not
  consume: they are then shut down, and their loader starts new ones as it iterates again);
- so does a new *dataset* of the same job (the same masters and job name) in the same process,
  the cell that made it run again: as one of its loaders begins an iteration, the job's other
  datasets in this process that hold trainers and are not iterating in another thread (one
  suspended in this thread counts as not iterating) send the finishes their loaders hold, and
  their trainers leave the job (`_torch_takeover`; workers that persist are shut down if they
  hold tasks their loop did not consume), rather than heartbeating on while the tasks
  they hold wait out their timeout (each counting against its task's failure budget) and the
  new iteration waits at its pass's end for them; iterated again, the dataset registers new
  trainers and takes the job back;
- an iteration suspended while a newer one of the job began in the process (an iterator not
  run to its end, as `next(iter(val_loader))` inside the training loop over the same job, or
  two loaders of a job iterated in turn) raises `FailedPrecondition` at its next step
  (`Walk.raise_if_stale`): the newer one walks with the same registrations, or took the job
  over, and each would otherwise take the other's answers or wait at its pass's end for the
  tasks the other holds. With DataLoader workers (persistent ones too), the suspended
  iteration's workers are shut down as the newer one begins, the finishes of what its loop
  consumed are sent, and the trainers lent to them leave the job (`_torch_supersede`): their
  tasks go back at once, and the newer one's reports are never held up by an ask of a worker
  that waits for the suspended loop.

One iteration of a `TaskLoader` is exactly one pass of the job, and `loader.pass_index` says
which: after the batches this process gets of the pass (it and its workers stop asking once
the pass is over or nothing is free for them: whoever holds the pass's last tasks may be
waiting for them, a DataLoader taking its workers' batches in turn or a DDP rank's step the
other ranks'), the iteration waits until the master's pass is over, taking tasks that come
back to the queue meanwhile (a walk that finds none of them free, as while a restore waits for
the job's pservers, is followed by a pause, longer each time, up to `REWALK_PAUSE_S_MAX`); it
yields nothing only when the job has ended.
The master starts the next pass only when every task of this one is finished, so a training
loop is

    while not loader.job_finished:
        for features, labels in loader:
            ...
        evaluate(loader.pass_index)

Without workers (and outside `ddp`), once the loader knows the task timeout, the next pass's
first task is asked for as a pass ends: the ask that carries the pass's last finish (the one
made once an answer said the pass's other tasks are held elsewhere) asks for the next pass, and
where that finish ends the pass the masters hand it the next pass's first task in the same write
(where it does not, the answer says the job is still at the pass, and the loader waits for its
end as usual); a walk that sees its pass end otherwise asks for that task at once, in the
background. The task is held for the next iteration (`PassAhead`): a loop that iterates its
passes back to back starts each with it, without waiting for a replicated write. A loop that
does not begin its next iteration within `PASS_AHEAD_HOLD_S` (2 s, at most a sixth of the task
timeout), evaluating meanwhile, gives it back: its registration leaves the job (the task goes back to the queue counting no failure,
for any process of the job) and a new one registers in its place. `load_state_dict` gives it
back before it restores.

With several training processes outside DDP, one that starts its next iteration after the
others ran a whole pass (or whose DataLoader workers first ask after that) finds that pass over
and walks the next one: count passes by `pass_index`, not by iterations (under
`loader.ddp(model)` every rank walks every pass). Each batch says which pass its task is of, so
a worker that first asks once the pass the iteration yielded batches of is over (its siblings
ran it) ends the iteration before that batch of the next pass; its task comes again, not
consumed, in the next iteration.

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
import weakref
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ._torch_batch_rows import checked_batch
from ._torch_carry import Carriage, WorkerCarrier
from ._torch_io import Receipt, Registration
from ._torch_loader import TaskLoader
from ._torch_pass_ahead import PASS_AHEAD_HOLD_S, PassAhead  # noqa: F401
from ._torch_takeover import DATASETS
# The walk's pauses, named here beside the dataset's other constants (documented above).
from ._torch_walk import CONSUMED_POLL_S, CONSUMED_POLL_S_MIN, HELD_POLL_S, HELD_POLL_S_MIN, PASS_END_IDLE_S, WORKER_ASKS_TOGETHER, Item, Walk  # noqa: F401
from .errors import DataError, InvalidArgument
from .task import Task
from .task_client import ASKS_TOGETHER_MAX, DEADLINE_S_DEFAULT, Masters, PathArg, TaskClient, _count, _flag, _patterns, master_list, register_together

__all__ = ["TaskDataset", "TaskLoader"]

#: Registrations per worker: a round of `WORKER_ASKS_TOGETHER` whose tasks were asked for at
#: once and are being read or consumed by the training loop, and a round whose finish reports
#: are on their way (the master answers a trainer that holds a task with that task until the
#: report is in, so with fewer the next round's asks often waited for them).
REGISTRATIONS_PER_WORKER = 2 * WORKER_ASKS_TOGETHER
#: Registrations of the training process without workers: one task being consumed, and the
#: others asked ahead all at once once their finish reports are in (as many as
#: `TaskClient.step_ahead` starts together, `ASKS_TOGETHER_MAX`): the masters write asks that
#: arrive together as one entry, so a pass of short tasks costs the masters a write per eight
#: tasks instead of one per two (their CPU for a pass of 50 tasks at batch 512: 0.050 s
#: against 0.115 s with three registrations, BENCHMARKS.md). Asks wait no longer than the
#: ask-ahead time: a slow loop keeps fewer tasks ahead (`TaskDataset._ask_ahead`).
REGISTRATIONS_OF_THE_LOOP = 1 + ASKS_TOGETHER_MAX
#: How long before a task's batches are expected to run out the next task is asked for (in the
#: training process, without workers), before the loader learned the job's task timeout:
#: enough to hide a task hand-off, short enough that a task's deadline, which runs from its
#: dispatch, is not spent waiting.
ASK_AHEAD_S = 0.02
#: Once the timeout is known (from a progress report's answer): asked this share of it ahead,
#: at most `ASK_AHEAD_S_MAX` (tasks shorter than that are asked for as the previous one starts).
ASK_AHEAD_TIMEOUT_SHARE = 0.05
ASK_AHEAD_S_MAX = 0.25


def _index_triple(index) -> Tuple[str, int, int]:
    """`index=(name, size, shard_size)` checked: a job name (text) and two whole numbers, or
    `InvalidArgument` saying which is wrong."""
    if isinstance(index, (str, bytes)) or not isinstance(index, Sequence) or len(index) != 3:
        raise InvalidArgument(f"index: (name, size, shard_size), not {index!r}")
    name, size, shard_size = index
    if not isinstance(name, str):
        raise InvalidArgument(f"index: the job's name first, as text, not {name!r}")
    size, shard_size = _count("size", size), _count("shard_size", shard_size)
    if size < 1:
        raise InvalidArgument(f"index: size {size}: the number of samples, at least 1")
    if shard_size < 1:
        raise InvalidArgument(f"index: shard_size {shard_size}: the samples of a task, at least 1")
    return name, size, shard_size


class TaskDataset(IterableDataset["Item"]):
    """A job's tasks as an IterableDataset of `(batch, receipts, holding, asked_at, carry,
    pass_index)` (`holding`: the receipt of the task the batch is of; `asked_at`: when it was
    asked for, by `time.monotonic()`; `carry`: which worker's task it is, for its finish to
    travel with that worker's next ask; `pass_index`: the pass the task is of); use it through
    `loader()`.

    Either `index=(name, size, shard_size)` with `read`: an index dataset the masters never
    read (tasks are ranges of `shard_size` indices of `[0, size)`), each batch being
    `read(start, end)` for a range of at most `batch_size` indices of a task (a batch never
    spans two tasks: a task's last batch holds the rest of its samples, so make `shard_size` a
    multiple of `batch_size` for equal batches; a `batch_size` above `shard_size` warns; a
    batch of other rows than its indices fails its task, `_torch_batch_rows`);
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
        records: Optional[Union[PathArg, Sequence[PathArg]]] = None,
        passes: int = 1,
        batch_size: int = 64,
        job: Optional[str] = None,
        transform: Optional[Callable[[np.ndarray, np.ndarray], object]] = None,
        name: Optional[str] = None,
        tls_ca: Optional[PathArg] = None,
        tls_cert: Optional[PathArg] = None,
        tls_key: Optional[PathArg] = None,
        token_file: Optional[PathArg] = None,
        deadline_s: Optional[float] = DEADLINE_S_DEFAULT,
        policy: Optional[Mapping[str, Any]] = None,
        label_dtype: torch.dtype = torch.int64,
        restart: bool = False,
        shuffle: bool = False,
        seed: int = 0,
        read_indices: Optional[Callable[[List[int]], object]] = None,
    ):
        super().__init__()
        batch_size = _count("batch_size", batch_size)
        if batch_size < 1:
            raise InvalidArgument("batch_size must be at least 1")
        if (index is None) == (records is None):
            raise InvalidArgument("give either index=(name, size, shard_size) with read, or records")
        if index is not None and read is None and read_indices is None:
            raise InvalidArgument("an index dataset needs read(start, end) -> batch")
        if index is not None and shuffle and read_indices is None:
            raise InvalidArgument("a shuffled index dataset needs read_indices(indices) -> batch (its samples come in a seeded order)")
        index = None if index is None else _index_triple(index)
        if index is not None and batch_size > index[2]:
            warnings.warn(
                f"batch_size={batch_size} is more than a task of job {index[0]!r} holds (shard_size={index[2]}): a batch never spans two tasks, so every batch has at most {index[2]} samples; raise shard_size or lower batch_size",
                stacklevel=2,
            )
        if index is not None and job is not None and job != index[0]:
            raise InvalidArgument(f"index=({index[0]!r}, ...) names the job, and job={job!r} another: give one")
        self.masters: List[str] = master_list(masters)
        self.index = index
        self.read = read
        self.read_indices = read_indices
        self.shuffle: bool = _flag("shuffle", shuffle)
        self.seed: int = _count("seed", seed)
        self.records: Optional[List[str]] = None if records is None else _patterns(records)
        self.passes: int = _count("passes", passes)
        self.batch_size: int = batch_size
        self.job: Optional[str] = job
        self.transform = transform
        self.label_dtype = label_dtype
        self.policy: Optional[Dict[str, Any]] = dict(policy) if policy else None
        self.restart: bool = _flag("restart", restart)
        self.name: str = name or f"torch-{socket.gethostname()}-{os.getpid()}"
        self.client_options: Dict[str, Any] = dict(tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key, token_file=token_file, deadline_s=deadline_s)
        self._registered: List[Registration] = []
        # (The training process, without workers.) The next pass's first task, asked for as a
        # pass ended (`_next_pass_ask`).
        self._pass_ahead: Optional[PassAhead] = None
        # How long the training loop takes per batch (smoothed; for asking ahead).
        self._batch_seconds = float("inf")
        self._registered_pid: Optional[int] = None
        # The loader iterating this dataset in its own process (no workers): its reports tell
        # a registration when its last task's finish is in, and its answers the task timeout.
        self._loader: Optional["TaskLoader"] = None
        # Every live loader of this dataset (the training process's): their reports hold
        # finishes of tasks these registrations took, which a new iteration must see landed.
        self._loaders: Optional["weakref.WeakSet[TaskLoader]"] = weakref.WeakSet()
        # Whether a loader of this dataset reported the job (copied into its workers, which
        # are started after that: they need not report it again).
        self._reported_by_loader = False
        # Per DataLoader worker, the ids of the trainers the loader registered for it and keeps
        # alive (copied into the workers, started after that).
        self._lent: Dict[int, List[int]] = {}
        # The loader's shared memory through which the workers' asks carry its finishes
        # (copied into the workers, started after it is made), and this worker's side of it.
        self._carriage: Optional[Carriage] = None
        self._carrier: Optional[WorkerCarrier] = None
        # The pass the loader's iteration walks (copied into the workers, started after it is
        # set): new registrations ask for it first, not for pass 0 (an ask for a pass that is
        # over is answered so: a write for nothing, in every new worker of every pass).
        self._pass_hint: Optional[int] = None
        # Walks of this dataset begun in the training process: one suspended while a newer
        # began (or while another dataset took the job over) raises at its next step.
        self._walks_begun = 0
        # An iteration of another dataset of this job in this process takes the job over from
        # this one while it is not iterating (its trainers leave: `_torch_takeover`).
        DATASETS.add(self)

    def job_name(self) -> str:
        """The job this dataset trains: `index`'s name, else `job`, else "python"."""
        return self.index[0] if self.index is not None else (self.job or "python")

    def client(self, suffix: str, trainer_id: Optional[int] = None) -> TaskClient:
        """A client of this job, registered as `<name>-<suffix>` (or acting as the trainer
        `trainer_id` another client registered under that name and keeps alive)."""
        return TaskClient(self.masters, name=f"{self.name}-{suffix}", job=self.job_name(), trainer_id=trainer_id, **self.client_options)

    def loaders(self) -> "List[TaskLoader]":
        """This dataset's live loaders (the training process's; none in a worker's copy)."""
        return list(self._loaders) if self._loaders is not None else []

    def worker_suffixes(self, worker: int) -> List[str]:
        """The names (after `<name>-`) of DataLoader worker `worker`'s registrations."""
        return [f"w{worker}-{index}" for index in range(REGISTRATIONS_PER_WORKER)]

    def __getstate__(self) -> Dict[str, Any]:
        # Registrations belong to the process that made them (a spawned worker makes its own).
        state = dict(self.__dict__)
        state["_registered"], state["_registered_pid"], state["_loader"], state["_carrier"] = [], None, None, None
        state["_loaders"] = None  # the training process's loaders; a worker iterates none
        state["_pass_ahead"] = None  # its lock and thread are the training process's
        return state

    def loader(self, *, allow_ended: bool = False, **dataloader_options: Any) -> "TaskLoader":
        """A `TaskLoader` over this dataset (DataLoader options: num_workers, prefetch_factor,
        pin_memory, collate_fn (given each batch this dataset made), ...; batching is this
        dataset's). A job that had already ended when the
        loader first looks raises `raftrain.JobEnded` (a script run again after its job
        finished would otherwise train nothing and succeed); `allow_ended=True` makes that an
        empty loop instead."""
        return TaskLoader(self, allow_ended=allow_ended, **dataloader_options)

    def __iter__(self) -> Iterator[Item]:
        """One pass as this process (or worker) sees it (`Walk`): tasks until the pass is over
        after it yielded some, or until nothing is free (the rest are held elsewhere), or the
        job finished."""
        fresh = self._registered_pid != os.getpid()
        registrations = self._registrations()
        loader = self._loader if get_worker_info() is None else None
        # The loader reads the job's state (every report answered) before an iteration, or
        # saw the last pass end: a task still held was not consumed.
        for registration in registrations:
            registration.forget_held()
        if fresh and not self._reported_by_loader:
            # Once a process: the job exists from then on (a repeat is answered alike, a write).
            # Not where its loader reported it before iterating (its workers then only join).
            self._report(registrations[0].client)
        if fresh and loader is not None:
            # Registered at once now the job exists, not one write each as each first asks.
            register_together([registration.client for registration in registrations])
        yield from Walk(self, registrations, loader).batches()

    def _report(self, client: TaskClient, restart: bool = False) -> None:
        """Reports the job's dataset (the first report wins; repeats are answered alike), or
        submits it with `policy`; `restart` (a loader's first report only, never a worker's)
        trains a job that ended again, as a new incarnation."""
        if self.policy is not None or restart:
            name = self.job_name()
            index = None if self.index is None else self.index[1:]
            policy = self.policy or {}
            client.submit_job(name, passes=self.passes, records=self.records, index=index, restart=restart, shuffle=self.shuffle, seed=self.seed, **policy)
        elif self.index is not None:
            name, size, shard_size = self.index
            client.report_index_dataset(name, size, shard_size, passes=self.passes, shuffle=self.shuffle, seed=self.seed)
        elif self.records is not None:  # (the constructor took one of index and records)
            client.report_dataset(self.records, passes=self.passes, job=self.job, shuffle=self.shuffle, seed=self.seed)

    def _registrations(self) -> "List[Registration]":
        """This process's registrations, made on first use and kept for later passes: a worker
        keeps heartbeating until it exits, so a task it yielded stays its own until the
        training loop reports it."""
        if self._registered_pid != os.getpid():
            worker = get_worker_info()
            if worker is None:
                suffixes = [f"main-{index}" for index in range(REGISTRATIONS_OF_THE_LOOP)]
                clients = [self.client(suffix) for suffix in suffixes]
            else:
                # A worker acts as the trainers its training process lent it (registered once,
                # kept alive there), else it registers its own.
                lent: Sequence[Optional[int]] = self._lent.get(worker.id) or [None] * REGISTRATIONS_PER_WORKER
                suffixes = self.worker_suffixes(worker.id)
                clients = [self.client(suffix, trainer_id) for suffix, trainer_id in zip(suffixes, lent)]
                carriage = self._carriage
                on = carriage is not None and carriage.on and worker.id < carriage.workers
                self._carrier = WorkerCarrier(carriage, worker.id) if carriage is not None and on else None
            if self._pass_hint:
                # (A client that is not a lent trainer registers here, as its first ask would.)
                for client in clients:
                    client.go_to(self._pass_hint)
            self._registered = [Registration(client, suffix) for client, suffix in zip(clients, suffixes)]
            self._registered_pid = os.getpid()
        return self._registered

    def _settle_asks(self) -> None:
        """Waits for this process's asks ahead and settles the finishes they carry (before the
        loader waits for every report to be answered)."""
        if self._registered_pid == os.getpid():
            # Not while a task asked for the next pass is being given back (`PassAhead`).
            with self._next_pass_ask().lock:
                for registration in self._registered:
                    registration.settle_ahead()

    def _next_pass_ask(self) -> PassAhead:
        """The step this process's registrations asked ahead for the next pass as the last one
        ended (`PassAhead`), made on first use in each process: a forked copy of the parent's
        has no giving thread, and its lock may have been held at the fork."""
        if self._pass_ahead is None or self._pass_ahead.pid != os.getpid():
            self._pass_ahead = PassAhead()
        return self._pass_ahead

    def _unregister(self, registrations: "List[Registration]") -> None:
        """Closes `registrations` (their heartbeats stop); a later iteration registers anew."""
        for registration in registrations:
            registration.close()
        if self._registered is registrations:
            self._registered, self._registered_pid = [], None

    def _batches(self, task: Task, ask_ahead: Callable[[int, int], bool], dispatched_at: float, carry: Optional[Tuple[int, int]] = None) -> Iterator[Item]:
        """The task's batches, each with the receipts it carries, the task it is of, when
        it was asked for (`time.monotonic()`, the same clock in every process of the machine:
        no later than its dispatch) and `carry` (the worker and its number for the task, whose
        asks carry its finish; `None` without a `Carriage`). `ask_ahead(left, count)` runs before a batch is yielded
        (`left` of the task's `count` batches, this one included) once the batches left are
        expected to take the loop no longer than the ask-ahead time, until it answers False."""
        receipt = (task.task_id, task.dispatch)
        try:
            ranges, batches = self._task_batches(task)
        except InvalidArgument:
            raise  # the loader's configuration, not the task's data
        except Exception as error:
            task._fail_for(error)
            raise
        count = len(ranges)
        # No ask ahead before the batches left are expected to take the loop the ask-ahead time
        # (checked once a task: the check per batch is a comparison).
        ask_from = self._ask_ahead_s() / self._batch_seconds if self._batch_seconds > 0 else float(count)
        started = time.monotonic()
        asking = True
        batches = iter(batches)
        for left in range(count, 0, -1):
            try:
                batch = next(batches)
            except Exception as error:
                # The data (or `read`) failed: the task is reported failed, spending its failure
                # budget, rather than handed to this process again and again for ever.
                task._fail_for(error)
                raise
            if asking and left <= ask_from:
                # False once no registration is left to ask for the rest of this task.
                asking = ask_ahead(left, count) is not False
            yield batch, [receipt] if left == 1 else [], receipt, dispatched_at, carry, task.pass_index
        # The loop asked for the batch after the task's last: how long a batch takes it, smoothed.
        took = (time.monotonic() - started) / max(count, 1)
        self._batch_seconds = took if self._batch_seconds == float("inf") else self._batch_seconds + (took - self._batch_seconds) / 4

    def _task_batches(self, task):
        """The task's batch ranges and (lazily) its batches: an index task's through `read`
        (or `read_indices`), a RecordIO task's from its chunks."""
        # A shuffled job's samples come in the task's seeded order (offsets into the task).
        order = task.sample_order()
        read = self.read
        if task.start is not None and (order is not None or read is None):
            return self._index_batches(task, order)
        if task.start is not None and read is not None:
            ranges = [(start, min(start + self.batch_size, task.end)) for start in range(task.start, task.end, self.batch_size)]
            return ranges, (checked_batch(read(start, end), end - start, lambda: f"task {task.task_id}: read({start}, {end})") for start, end in ranges)
        features, labels = task.arrays()
        if order is not None:
            features, labels = features[order], labels[order]
        count = len(labels)
        ranges = [(start, min(start + self.batch_size, count)) for start in range(0, count, self.batch_size)] or [(0, 0)]
        transform = self.transform
        if transform is not None:
            return ranges, (transform(features[start:end], labels[start:end]) for start, end in ranges)
        as_tensors = _labels_as(labels, self.label_dtype, task.task_id)
        return ranges, ((torch.from_numpy(np.array(features[start:end])), as_tensors[start:end]) for start, end in ranges)

    def _ask_ahead(self, registrations: List[Registration], loader: "TaskLoader", left: int, count: int) -> bool:
        """Asks `registrations` for their next steps in the background, in the training process,
        while `left` of the current task's `count` batches are still to be consumed, once the
        task asked would wait (the batches left, then the tasks asked ahead before it, at the
        loop's pace) no longer than the ask-ahead time (`_ask_ahead_s`): its deadline runs
        meanwhile, and a loop whose batches take longer than that gains nothing from asking
        ahead that the ask's millisecond would cost it. The registrations that took their
        tasks longest ago ask, once their tasks' finish reports are sent or carried by an ask
        (else the master would answer those tasks again), which they usually are already; if
        not, a later batch asks, or the task's last waits for them. They ask once no task
        asked ahead is still to come, all at once (one replicated write for all) as many as
        would wait no longer than that time, and a DDP rank no more than are left of its share
        of the pass (`_DdpPasses._share_out`). False once none of `registrations` is left to ask for the rest of this task."""
        if any(registration.asked_ahead() for registration in registrations):
            return False
        free = sorted(registrations, key=Registration.taken)
        ask_ahead_s = self._ask_ahead_s()
        # Those whose tasks would wait no longer than the ask-ahead time, the task asked by
        # each after those asked before it.
        fits = [registration for ahead, registration in enumerate(free) if (left + ahead * count) * self._batch_seconds <= ask_ahead_s]
        if loader._pass_share is not None:
            room = loader._pass_share - loader._taken_in_pass
            if room <= 0:
                return False
            fits = fits[:room]
        if not fits:
            return True
        upto = [registration.reported_upto if registration.reported_upto is not None else loader._reports_queued() for registration in fits]
        if left == 1:
            # The task's last batch, its last chance to ask ahead: a report the thread is
            # sending in the way is waited for (what is left of its write), not the next task
            # asked then, alone (a whole write, and the round after it asked alone too).
            loader._report_queue().clear_of(max(upto))
        if len(fits) > 1:
            return not Registration.ask_ahead_together(fits, loader._report_queue(), upto)
        return not fits[0].ask_ahead(loader._report_queue(), upto[0])

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
        read_indices = self.read_indices
        if read_indices is None:
            raise InvalidArgument(f"task {task.task_id} of a shuffled job: give read_indices(indices) -> batch to read it")
        task_indices = task.indices
        indices = [task_indices[offset] for offset in order] if order is not None else list(task_indices)
        ranges = [(start, min(start + self.batch_size, len(indices))) for start in range(0, len(indices), self.batch_size)]
        return ranges, (_read_indices_checked(read_indices, task, indices[start:end]) for start, end in ranges)

def _read_indices_checked(read_indices: Callable[[List[int]], object], task: Task, indices: List[int]) -> object:
    """`read_indices(indices)` of `task`, checked to hold a sample per index (`checked_batch`)."""
    call = lambda: f"task {task.task_id}: read_indices([{len(indices)} indices from {indices[0]}])"  # noqa: E731
    return checked_batch(read_indices(indices), len(indices), call)


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
