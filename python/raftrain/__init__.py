"""raftrain from Python: a fault-tolerant task queue for training jobs.

- `TaskClient` / `Task`: take a job's tasks across passes from the replicated master group,
  read their RecordIO chunks (checked), report them finished or failed.
- `recordio.Reader` / `recordio.Writer`, `Example`: the dataset format.
- `PServerClient`: the job's model on raftrain's parameter servers.
- `raftrain.torch.TaskDataset` (imported on its own; needs PyTorch): the task queue as a
  `torch.utils.data.IterableDataset`.

Errors are `raftrain.Error` subclasses carrying the gRPC status (`code`) and the server's
message. Importing `raftrain` needs NumPy only.
"""

import os
from importlib.metadata import PackageNotFoundError, version

from . import _logging, _native, errors, recordio
from .errors import (
    DataError,
    DeadlineExceeded,
    Error,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    JobEnded,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    TasksFailed,
    Unauthenticated,
    Unavailable,
)
from .example import Example
from .pserver import PServerClient
from .task import Task
from .task_client import Step, StepKind, TaskClient, Waiting, status

try:
    #: The installed package's version (the extension crate's, python/Cargo.toml).
    __version__ = version("raftrain")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "unknown"

# A forked child (a DataLoader worker) must not inherit standard error's lock or the log
# queue's held by one of the parent's runtime threads (src/fork_guard.rs); it forwards its own
# log events to `logging` (_logging.py).
os.register_at_fork(before=_native.before_fork, after_in_parent=_native.after_fork, after_in_child=_native.after_fork_in_child)
os.register_at_fork(after_in_child=_logging.start)
_logging.start()

__all__ = [
    "__version__",
    "DataError",
    "DeadlineExceeded",
    "Error",
    "Example",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "JobEnded",
    "NotFound",
    "PermissionDenied",
    "PServerClient",
    "ResourceExhausted",
    "Step",
    "StepKind",
    "Waiting",
    "Task",
    "TaskClient",
    "TasksFailed",
    "Unauthenticated",
    "Unavailable",
    "errors",
    "recordio",
    "status",
]
