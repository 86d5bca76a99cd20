"""`supersede`: an iteration of a `TaskLoader` with DataLoader workers, suspended in this thread
(an iterator not run to its end: `next(iter(val_loader))` inside the loop over another loader
of the same job, or `it = iter(loader); next(it)` before `for batch in loader`), ends as a newer
iteration of its job begins here. Its workers would keep the tasks they took, heartbeated by
this process, and the newer iteration's pass would wait at its end for their timeouts (each
counting a failure against its task), or the suspended loop, resumed, would take tasks of the
newer one's pass. So its workers are shut down, the finishes of what its loop consumed are sent,
and the trainers lent to its workers leave the job (their tasks go back now); resumed, it
raises `FailedPrecondition`. Without workers the walks themselves go stale
(`Walk.raise_if_stale`). Not a loader whose workers persist (`persistent_workers=True`): the
DataLoader hands the same workers to its next iteration. Imports no PyTorch."""

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
    for loader in list(dataset._loaders or ()):
        if loader._iterating_in == here:
            supersede(loader)


def supersede(loader: "TaskLoader") -> None:
    """Ends `loader`'s suspended iteration with workers (see the module); nothing for a loader
    without workers, or whose workers persist."""
    dataloader = loader.dataloader
    if not dataloader.num_workers or dataloader.persistent_workers:
        return
    loader._iterations += 1
    loader._iterating_in = None
    workers, loader._workers_iter = loader._workers_iter, None
    shutdown = getattr(workers, "_shutdown_workers", None)
    if shutdown is not None:
        # Their asks under way are over: the finishes they carried go from here.
        shutdown()
    try:
        if loader._reports is not None:
            loader._reports.flush()
    except Error as error:
        _log.warning("finishes of a superseded iteration of job %r not sent: %s", loader.dataset.job_name(), error)
    # A new carriage for the next workers: the old one's counters are of workers stopped mid-ask.
    loader._carriage = None
    clients, loader._lent_clients, loader._lent = loader._lent_clients, [], {}
    try:
        leave_together(clients)
    except Error as error:
        # What they hold goes back when their leases end (they heartbeat no more).
        _log.warning("the trainers of a superseded iteration of job %r did not leave the job: %s", loader.dataset.job_name(), error)
    _log.info("an iteration of job %r suspended with its workers' tasks ended: a newer one began in this thread", loader.dataset.job_name())
