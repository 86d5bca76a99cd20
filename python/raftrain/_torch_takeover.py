"""`JobDatasets`: the `TaskDataset`s of this process, by job, so that an iteration of one takes
the job over from the others that are not iterating. A notebook cell run again after its loop
stopped inside a pass makes a new dataset of the same job; the old one's trainers still
heartbeat from this process, so the tasks they hold (asked ahead, or the one the loop stopped
inside) would stay theirs until the task timeout, and the new loader's pass would wait that
long for them, each counting a timeout against its task. Instead they leave the job as the
new iteration begins: their tasks go back to the queue at once, counting no failure. Imports
no PyTorch."""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import TYPE_CHECKING, Tuple

from ._torch_supersede import stop_workers_holding_tasks, supersede_suspended
from .errors import Error
from .task_client import leave_together

if TYPE_CHECKING:
    from .torch import TaskDataset

_log = logging.getLogger(__name__)

# A job as this process names it: its masters (as given, sorted) and its name.
JobKey = Tuple[Tuple[str, ...], str]


class JobDatasets:
    """The datasets this process made (weakly held: one no longer referenced is gone)."""

    def __init__(self) -> None:
        self._datasets: "weakref.WeakSet[TaskDataset]" = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, dataset: "TaskDataset") -> None:
        with self._lock:
            self._datasets.add(dataset)

    def take_over(self, dataset: "TaskDataset") -> None:
        """(The training process, as an iteration of `dataset` begins.) The other datasets of
        its job that hold trainers registered in this process and are not iterating in another
        thread leave the job (`release`). One suspended in this thread (a loop that stopped
        inside a pass, its generator not closed yet; two loaders of a job iterated in turn)
        counts as not iterating: a thread cannot advance both, and each would wait for the
        other's tasks at its pass's end."""
        key = job_key(dataset)
        with self._lock:
            others = [other for other in self._datasets if other is not dataset and job_key(other) == key]
        for other in others:
            if holds_trainers(other) and not iterating_elsewhere(other):
                release(other)


def job_key(dataset: "TaskDataset") -> JobKey:
    """The job `dataset` trains, as this process names it."""
    return tuple(sorted(dataset.masters)), dataset.job_name()


def holds_trainers(dataset: "TaskDataset") -> bool:
    """Whether `dataset` has trainers registered by this process: its own, or lent to the
    DataLoader workers of one of its loaders."""
    if dataset._registered and dataset._registered_pid == os.getpid():
        return True
    return any(loader._lent_clients for loader in dataset.loaders())


def iterating_elsewhere(dataset: "TaskDataset") -> bool:
    """Whether a loader of `dataset` is iterating in a thread other than this one."""
    here = threading.get_ident()
    return any(loader._iterating_in not in (None, here) for loader in dataset.loaders())


def release(dataset: "TaskDataset") -> None:
    """`dataset`'s trainers leave the job (the tasks they hold go back now, counting no
    failure), once the finishes its loaders hold are sent (a task the loop consumed is not
    trained again); a task asked ahead for the next pass goes back with its trainer. Iterated
    again, the dataset registers anew; an iteration of it still suspended raises
    `FailedPrecondition` at its next step (`Walk.raise_if_stale`, `_torch_supersede`)."""
    # One suspended here with workers first: their asks carry its finishes.
    supersede_suspended(dataset)
    loaders = dataset.loaders()
    for loader in loaders:
        try:
            loader._flush_reports()
        except Error as error:
            _log.warning("finishes of a TaskDataset of job %r not sent before it left the job: %s", dataset.job_name(), error)
    # A task asked ahead for the next pass is no longer held for the next iteration: it goes
    # back as its trainer leaves.
    dataset._next_pass_ask().claim()
    registrations = dataset._registered if dataset._registered_pid == os.getpid() else []
    dataset._registered, dataset._registered_pid = [], None
    # An iteration of it still suspended is over: it raises at its next step (`Walk`).
    dataset._walks_begun += 1
    clients = [registration.client for registration in registrations]
    for loader in loaders:
        if not loader.dataloader.persistent_workers:
            clients += loader._lent_clients
            loader._lent_clients, loader._lent = [], {}
        else:
            # Workers that persist, holding tasks their loop stopped before: shut down, their
            # trainers leave the job (the loader starts new ones if it iterates again).
            stop_workers_holding_tasks(loader)
    try:
        leave_together(clients)
    except Error as error:
        # What they hold goes back when their leases end (they heartbeat no more).
        _log.warning("the trainers of a TaskDataset of job %r did not leave the job: %s", dataset.job_name(), error)
    _log.info("%d trainers of an idle TaskDataset of job %r left the job: another dataset of it iterates in this process", len(clients), dataset.job_name())


#: This process's datasets.
DATASETS = JobDatasets()
