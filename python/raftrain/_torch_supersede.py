"""`supersede`: an iteration of a `TaskLoader` with DataLoader workers, suspended in this thread
(an iterator not run to its end: `next(iter(val_loader))` inside the loop over another loader
of the same job, or `it = iter(loader); next(it)` before `for batch in loader`), ends as a newer
iteration of its job begins here. Its workers would keep the tasks they took, heartbeated by
this process, and the newer iteration's pass would wait at its end for their timeouts (each
counting a failure against its task), or the suspended loop, resumed, would take tasks of the
newer one's pass. So its workers are shut down, the finishes of what its loop consumed are sent,
and the trainers lent to its workers leave the job (their tasks go back now); resumed, it
raises `FailedPrecondition`. Without workers the walks themselves go stale
(`Walk.raise_if_stale`). Workers that persist (`persistent_workers=True`) are shut down alike,
and the DataLoader starts new ones for the loader's next iteration.

`stop_workers` is the same for a loader that stopped iterating: one whose workers persist keeps
them, and the tasks they took ahead, while another loader of the job iterates; that loader,
waiting for its pass's end, stops them where they hold tasks (`stop_workers_holding_tasks`). Imports no
PyTorch."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from .errors import Error
from .task_client import leave_together

if TYPE_CHECKING:
    from ._torch_loader import TaskLoader
    from .torch import TaskDataset

_log = logging.getLogger(__name__)


def supersede_suspended(dataset: "TaskDataset") -> None:
    """(As an iteration of `dataset` begins in this thread.) Every loader of `dataset` whose
    iteration with workers is suspended in this thread is superseded."""
    here = threading.get_ident()
    for loader in dataset.loaders():
        if loader._iterating_in == here:
            supersede(loader)


def supersede(loader: "TaskLoader") -> None:
    """Ends `loader`'s suspended iteration with workers (see the module); nothing for a loader
    without workers."""
    if not loader.dataloader.num_workers:
        return
    loader._iterations += 1
    loader._iterating_in = None
    stop_workers(loader)
    _log.info("an iteration of job %r suspended with its workers' tasks ended: a newer one began in this thread", loader.dataset.job_name())


def stop_workers_holding_tasks(loader: "TaskLoader") -> None:
    """`stop_workers` where `loader`'s workers hold tasks its loop did not consume
    (`Carriage.held`); nothing otherwise."""
    if loader._carriage is not None and loader._carriage.held():
        stop_workers(loader)


def stop_workers(loader: "TaskLoader") -> None:
    """Shuts `loader`'s DataLoader workers down (persistent ones too: the DataLoader starts new
    ones for its next iteration), sends the finishes of what its loop consumed, and the
    trainers lent to its workers leave the job: the tasks they took go back now."""
    dataloader = loader.dataloader
    workers, loader._workers_iter = loader._workers_iter, None
    if dataloader.persistent_workers:
        workers, dataloader._iterator = dataloader._iterator, None
    shutdown = getattr(workers, "_shutdown_workers", None)
    if shutdown is not None:
        # Their asks under way are over: the finishes they carried go from here.
        shutdown()
    try:
        if loader._reports is not None:
            loader._reports.flush()
    except Error as error:
        _log.warning("finishes of a stopped iteration of job %r not sent: %s", loader.dataset.job_name(), error)
    # A new carriage for the next workers: the old one's counters are of workers stopped mid-ask.
    loader._carriage = None
    clients, loader._lent_clients, loader._lent = loader._lent_clients, [], {}
    try:
        leave_together(clients)
    except Error as error:
        # What they hold goes back when their leases end (they heartbeat no more).
        _log.warning("the trainers of stopped workers of job %r did not leave the job: %s", loader.dataset.job_name(), error)
