"""raftrain's exceptions: one class per gRPC status a call can end in, all under `Error`.

Every exception carries `code`, the gRPC status name ("UNAVAILABLE", "INVALID_ARGUMENT", ...),
and `message`, the text of the answer (the server's message for an answer from a master or a
pserver, with the call's name). The Rust extension makes them through `from_native`; nothing
panics into Python: a bug in the extension is `Internal`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Type


class Error(Exception):
    """Base of every raftrain error."""

    def __init__(self, message: str, code: str = "UNKNOWN"):
        super().__init__(message)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class TasksFailed(Error):
    """The job finished, but some of its tasks failed (each past its failure budget): their
    data was not trained on. `failed_tasks` lists them as `{"task", "reason"}`."""

    def __init__(self, failed_tasks: List[Dict[str, Any]], job: Optional[str] = None):
        shown = "; ".join(f"task {task['task']}: {task['reason']}" for task in failed_tasks[:10])
        more = f" (and {len(failed_tasks) - 10} more)" if len(failed_tasks) > 10 else ""
        name = f"job {job!r}" if job else "the job"
        super().__init__(f"{name} finished with {len(failed_tasks)} failed tasks: {shown}{more}", "FAILED_PRECONDITION")
        self.failed_tasks: List[Dict[str, Any]] = failed_tasks
        self.job = job

    def __reduce__(self) -> Tuple[Any, ...]:
        # Pickled as its arguments (a DataLoader worker's, a multiprocessing result's).
        return (TasksFailed, (self.failed_tasks, self.job))


class InvalidArgument(Error, ValueError):
    """The request is wrong (bad input, an address that is not one): retrying changes nothing."""

    def __init__(self, message: str, code: str = "INVALID_ARGUMENT"):
        super().__init__(message, code)


class NotFound(Error, LookupError):
    """The master does not know the trainer (it registers again by itself)."""


class FailedPrecondition(Error):
    """The call does not fit the state: a stale request, a layout that differs, a closed writer,
    an object made in another process."""


class JobEnded(FailedPrecondition):
    """The job had already ended (finished or cancelled) when this loader first looked: it
    trained nothing here. An ended job never runs again: train again with
    `TaskDataset(..., restart=True)` (a new incarnation of the same name, `raftrain job submit
    --restart`), or pass `allow_ended=True` to the loader to make this an empty loop."""

    def __init__(self, job: Optional[str], how: str):
        name = f"job {job!r}" if job else "the job"
        super().__init__(
            f"{name} had already {how} before this loader took any of its tasks: nothing was trained; "
            "an ended job never runs again: pass restart=True (a new incarnation of the name) to train again",
            "FAILED_PRECONDITION",
        )
        self.job = job
        self.how = how

    def __reduce__(self) -> Tuple[Any, ...]:
        # Pickled as its arguments (a DataLoader worker's, a multiprocessing result's).
        return (JobEnded, (self.job, self.how))


class ResourceExhausted(Error):
    """The masters have no room for this client now; the same call may succeed later."""


class Unavailable(Error, ConnectionError):
    """No master (or pserver) could be reached: none runs, no quorum, TLS or token differ."""


class DeadlineExceeded(Unavailable, TimeoutError):
    """No leader answered within the call's deadline. A write's outcome is unknown: it may
    have been applied (once: its stamp makes a later retry harmless)."""


class Unauthenticated(Error, PermissionError):
    """The cluster demands a token this client does not have (or another one)."""


class PermissionDenied(Error, PermissionError):
    """The caller may not do this."""


class Internal(Error):
    """A bug: in a server, or in this extension (a caught panic)."""


class DataError(Error):
    """A dataset's bytes are unusable: a RecordIO chunk that does not match the master's record
    or its CRC, a record that is no Example. `fault` says whose: "content" (the data is bad for
    everyone) or "local" (this process cannot read it: a missing or truncated copy)."""

    def __init__(self, message: str, code: str = "DATA_LOSS", fault: Optional[str] = None):
        super().__init__(message, code)
        self.fault: str = fault or "content"


CODES: Dict[str, Type[Error]] = {
    "INVALID_ARGUMENT": InvalidArgument,
    "OUT_OF_RANGE": InvalidArgument,
    "NOT_FOUND": NotFound,
    "FAILED_PRECONDITION": FailedPrecondition,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "UNAVAILABLE": Unavailable,
    "CANCELLED": Unavailable,
    "ABORTED": Unavailable,
    "DEADLINE_EXCEEDED": DeadlineExceeded,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
    "INTERNAL": Internal,
    "DATA_LOSS": DataError,
}


def from_native(code: str, message: str, fault: Optional[str] = None) -> Error:
    """The exception for a status name and message (called by the Rust extension)."""
    cls = CODES.get(code, Error)
    if cls is DataError:
        return DataError(message, code, fault)
    return cls(message, code)
