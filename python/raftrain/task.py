"""`Task`: one task a `TaskClient` took, to read, train on once and report."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Iterator, List, Literal, Optional, Tuple, Type

from . import _native
from .errors import DataError, FailedPrecondition
from .example import Example, decode_dense

if TYPE_CHECKING:
    import numpy as np

    from .task_client import TaskClient


class Task:
    """A task from the master: RecordIO chunks to read, or (index datasets) the range
    `start`..`end` of indices, to train on once and report.

    As a context manager it is reported finished on a normal exit (from `TaskClient.tasks()`,
    with the ask for the next task) and failed, with the exception's text, otherwise (a `DataError` with its fault, anything else as the data's
    fault: the master gives a task that keeps failing up after its failure budget)."""

    def __init__(self, client: TaskClient, native: Any):
        self._client = client
        self.task_id: int = native.task_id
        #: Which dispatch of the task this is: every hand-out draws a new one, and a report
        #: counts only for the dispatch it names (the wire calls it the epoch).
        self.dispatch: int = native.dispatch
        self.pass_index: int = native.pass_index
        #: (path, offset, compressed_size, record_count) of each chunk, as the master recorded it.
        self.chunks: List[Tuple[str, int, int, int]] = list(native.chunks)
        #: The index range `[start, end)` of an index task; `None` for a RecordIO task.
        self.start: Optional[int] = native.start
        self.end: Optional[int] = native.end
        self.deadline_ms: int = native.deadline_ms
        #: The job's shuffle seed when it is shuffled (`None`: samples in stored order).
        self.shuffle_seed: Optional[int] = native.shuffle_seed
        #: Where the task comes in its pass: the masters hand a pass's tasks out by increasing
        #: rank (the seeded order of a shuffled job, else the task id), tasks taken back and
        #: handed out again aside.
        self.pass_rank: int = native.pass_rank
        self.reported: Optional[str] = None
        # Set by `TaskClient.tasks()`: a `with` block that ends normally hands the task to it,
        # to be reported with the next ask, instead of reporting it now.
        self._finish_later: Optional[Callable[["Task"], None]] = None

    @property
    def record_count(self) -> int:
        """Records (RecordIO) or indices (index task) the task covers."""
        if self.start is not None and self.end is not None:
            return self.end - self.start
        return sum(chunk[3] for chunk in self.chunks)

    def sample_order(self) -> Optional[List[int]]:
        """The order to read this task's samples in, as offsets `0..record_count` into it,
        when the job is shuffled (`None` otherwise): a permutation of (seed, pass, task), the
        same in every process, worker and start method, and in the Rust trainer."""
        if self.shuffle_seed is None:
            return None
        return _native.sample_order(self.shuffle_seed, self.pass_index, self.task_id, self.record_count)

    @property
    def indices(self) -> range:
        """The indices of an index task."""
        if self.start is None or self.end is None:
            raise FailedPrecondition(f"task {self.task_id} is RecordIO chunks, not an index range", "FAILED_PRECONDITION")
        return range(self.start, self.end)

    def records(self) -> Iterator[bytes]:
        """Every record of the task's chunks, each chunk checked against the master's record
        (payload size, record count) and its CRC before any of its records is yielded."""
        if self.start is not None:
            raise FailedPrecondition(
                f"task {self.task_id} is the index range [{self.start}, {self.end}): read those indices yourself",
                "FAILED_PRECONDITION",
            )
        for path, offset, compressed_size, record_count in self.chunks:
            yield from _native.read_task_chunk(path, offset, compressed_size, record_count)

    def examples(self) -> Iterator[Example]:
        """The task's records decoded as `Example`s (NumPy arrays)."""
        for index, record in enumerate(self.records()):
            try:
                yield Example.decode(record)
            except DataError as error:
                raise DataError(f"task {self.task_id} record {index}: {error.message}", fault="content") from None

    def arrays(self) -> Tuple[np.ndarray, np.ndarray]:
        """The task's dense Examples as (features float32 [n, d], labels float32 [n])."""
        return decode_dense(self.records())

    def progress(self) -> Optional[float]:
        """Reports that this process is still at work on the task (a slow training loop): its
        deadline moves to a whole timeout from now, so only a stuck or dead holder loses it.
        Returns the timeout in seconds (report again well within it), or `None` when the task
        was taken back or reported meanwhile (or the job was cancelled)."""
        return self._client.progress(self.task_id, self.dispatch)

    def finish(self) -> bool:
        """Reports the task done; `False` if the master had taken it back meanwhile (its
        lease ran out), in which case another trainer gets it."""
        accepted = self._client._native.finish(self.task_id, self.dispatch)
        self.reported = "finished"
        return accepted

    def fail(self, reason: str, *, fault: str = "content") -> bool:
        """Reports the task failed: `fault="content"` when the data is bad (spends the task's
        failure budget), `"local"` when only this process could not read it."""
        accepted = self._client._native.fail(self.task_id, self.dispatch, str(reason), fault)
        self.reported = "failed"
        return accepted

    def __enter__(self) -> "Task":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], traceback: Optional[TracebackType]) -> Literal[False]:
        if self.reported is not None:
            return False
        if exc is None and self._finish_later is not None:
            self.reported = "finished"
            self._finish_later(self)
        elif exc is None:
            self.finish()
        elif isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
            # Not the data's fault: the task goes back when this trainer's lease ends.
            pass
        else:
            self._fail_for(exc)
        # The user's exception always propagates (a report's own failure is only noted on it).
        return False

    def _fail_for(self, exc: BaseException) -> None:
        """Reports the task failed with `exc`'s text (cut to what the master keeps, by the
        native client); a report that fails is noted on `exc`, never raised instead of it."""
        reason, fault = (str(exc), exc.fault) if isinstance(exc, DataError) else (f"{type(exc).__name__}: {exc}", "content")
        try:
            self.fail(reason, fault=fault)
        except Exception as error:  # noqa: BLE001 - the user's exception matters more
            if hasattr(exc, "add_note"):
                exc.add_note(f"raftrain: reporting task {self.task_id} failed also failed: {error}")

    def __repr__(self) -> str:
        covers = f"start={self.start}, end={self.end}" if self.start is not None else f"chunks={len(self.chunks)}"
        return f"Task(task_id={self.task_id}, dispatch={self.dispatch}, pass_index={self.pass_index}, {covers})"
