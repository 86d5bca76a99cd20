"""`TaskDataset` and `TaskLoader`: a raftrain job's tasks as PyTorch data, for any number of
DataLoader workers and training processes. Importing `raftrain` does not import this module
(nor PyTorch).

How it works
------------
Each DataLoader worker (or the training process itself with `num_workers=0`) is a trainer of
the job: it registers with the masters (twice: see below), takes tasks, reads each task's
samples and yields them in batches. Batches never span two tasks: a task's last batch may be
short. The batch holding a task's last sample carries a *receipt* (task id, epoch).

`TaskLoader` wraps `DataLoader(dataset, batch_size=None, ...)` in the training process. It
yields the batches alone and reports a task finished when the training loop asks for the batch
after the one carrying the task's receipt: the loop body has then run on every sample of the
task. So, with any `num_workers` and `prefetch_factor`:

- a task is reported finished exactly when the training loop has consumed all its samples,
  by the training process (not the worker, which may be several batches ahead);
- prefetched batches of tasks not yet consumed are not reported; if the process dies they are
  lost with it, and their tasks go back to the queue when the workers' trainer leases end (the
  workers die with their DataLoader): each task is trained on at least once per pass;
- a worker holds at most two unreported tasks (one per registration): the master hands a
  trainer one task at a time, so the second registration lets a worker read ahead while its
  previous task's last batches wait in the prefetch queue;
- a task must be consumed before the master's task timeout (`--task-timeout-min-ms`, 20 s by
  default, scaled by the task's size), or the master hands it to another trainer as well; the
  late report is then refused (logged) and the task trained twice.

Several training processes (torchrun): each makes its own `TaskDataset` and `TaskLoader`; the
master spreads tasks among all their workers, so processes get different numbers of batches.
With DistributedDataParallel use `torch.distributed.algorithms.Join` for the uneven ends.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from .task_client import DEADLINE_S_DEFAULT, Masters, TaskClient, master_list

#: Registrations per worker: one task in flight to the training loop, one being read.
REGISTRATIONS_PER_WORKER = 2
#: Between asks while every registration of a worker holds an unreported task.
HELD_POLL_S = 0.05

Receipt = Tuple[int, int]


class TaskDataset(IterableDataset):
    """A job's tasks as an IterableDataset of `(batch, receipts)`; use it through `loader()`.

    `records`: the job's RecordIO files (paths or globs, as the masters see them) of dense
    `Example`s; each batch is `(features float32 [n, d], labels float32 [n])` as tensors, or
    `transform(features, labels)` of those NumPy arrays.
    """

    def __init__(
        self,
        masters: Masters,
        *,
        records: Sequence[str],
        passes: int = 1,
        batch_size: int = 64,
        job: str = "python",
        transform: Optional[Callable[[np.ndarray, np.ndarray], object]] = None,
        name: Optional[str] = None,
        tls_ca=None,
        tls_cert=None,
        tls_key=None,
        token_file=None,
        deadline_s: Optional[float] = DEADLINE_S_DEFAULT,
    ):
        super().__init__()
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.masters = master_list(masters)
        self.records = [os.fspath(pattern) for pattern in ([records] if isinstance(records, (str, os.PathLike)) else records)]
        self.passes = int(passes)
        self.batch_size = int(batch_size)
        self.job = job
        self.transform = transform
        self.name = name or f"torch-{socket.gethostname()}-{os.getpid()}"
        self.client_options = dict(tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key, token_file=token_file, deadline_s=deadline_s)

    def client(self, suffix: str) -> TaskClient:
        """A client of this job's masters, registered as `<name>-<suffix>`."""
        return TaskClient(self.masters, name=f"{self.name}-{suffix}", **self.client_options)

    def loader(self, **dataloader_options) -> "TaskLoader":
        """A `TaskLoader` over this dataset (DataLoader options: num_workers, prefetch_factor,
        pin_memory, ...; batching is this dataset's)."""
        return TaskLoader(self, **dataloader_options)

    def __iter__(self) -> Iterator[Tuple[object, List[Receipt]]]:
        worker = get_worker_info()
        worker_name = f"w{worker.id}" if worker is not None else "main"
        clients = [self.client(f"{worker_name}-{index}") for index in range(REGISTRATIONS_PER_WORKER)]
        try:
            clients[0].report_dataset(self.records, passes=self.passes, job=self.job)
            held: List[Optional[Receipt]] = [None] * len(clients)
            while True:
                task = _next_task(clients, held)
                if task is None:
                    return
                yield from self._batches(task)
        finally:
            for client in clients:
                client.close()

    def _batches(self, task) -> Iterator[Tuple[object, List[Receipt]]]:
        features, labels = task.arrays()
        count = len(labels)
        for start in range(0, count, self.batch_size):
            end = min(start + self.batch_size, count)
            receipts = [(task.id, task.epoch)] if end == count else []
            yield self._batch(features[start:end], labels[start:end]), receipts
        if count == 0:
            yield self._batch(features, labels), [(task.id, task.epoch)]

    def _batch(self, features: np.ndarray, labels: np.ndarray):
        if self.transform is not None:
            return self.transform(features, labels)
        return torch.from_numpy(np.array(features)), torch.from_numpy(np.array(labels))


def _next_task(clients: List[TaskClient], held: List[Optional[Receipt]]):
    """The next task through a registration whose last task was reported; `None` once the job
    finished. A registration the master answers with the task it already handed out still
    holds it unreported: the training loop has not consumed it yet."""
    while True:
        for index, client in enumerate(clients):
            task = client.next_task()
            if task is None:
                return None
            if held[index] == (task.id, task.epoch):
                continue
            held[index] = (task.id, task.epoch)
            return task
        time.sleep(HELD_POLL_S)


class TaskLoader:
    """Iterates a `TaskDataset` through a DataLoader and reports each task finished once the
    training loop has consumed its last batch (see the module's documentation)."""

    def __init__(self, dataset: TaskDataset, **dataloader_options):
        if dataloader_options.pop("batch_size", None) is not None:
            raise ValueError("TaskDataset batches itself: give batch_size to the TaskDataset")
        self.dataset = dataset
        self.dataloader = DataLoader(dataset, batch_size=None, **dataloader_options)
        #: Tasks this loader reported finished, and reports the master refused (taken back).
        self.finished = 0
        self.refused = 0

    def __iter__(self) -> Iterator[object]:
        reporter: Optional[TaskClient] = None
        try:
            for batch, receipts in self.dataloader:
                yield batch
                # The loop asked for the next batch: it has consumed this one.
                if receipts:
                    reporter = reporter or self.dataset.client("reporter")
                    self._report(reporter, receipts)
        finally:
            if reporter is not None:
                reporter.close()

    def _report(self, reporter: TaskClient, receipts: List[Receipt]) -> None:
        for task_id, epoch in receipts:
            if reporter._native.finish(int(task_id), int(epoch)):
                self.finished += 1
            else:
                self.refused += 1
                warnings.warn(f"task {task_id} (epoch {epoch}) was taken back before it was consumed; it is trained again elsewhere")
        receipts.clear()
