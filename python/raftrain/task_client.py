"""`TaskClient`: a Python trainer of a raftrain job (its tasks are `raftrain.task.Task`).

A `TaskClient` is one registered trainer. It heartbeats in the background (on the Rust
runtime, so a training step that holds the GIL for long does not starve it), takes tasks across
passes until the job finishes, and reports each one finished or failed. Every call goes through
the Rust `MasterClient`: leader discovery, redirects, retries inside `deadline_s`, one stamp per
logical write reused by its retries (a report retried across a leader change is applied once),
TLS and the token.
"""

from __future__ import annotations

import concurrent.futures
import enum
import json
import os
import socket
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

from . import _native
from .errors import InvalidArgument, TasksFailed
from .task import Task

T = TypeVar("T")

#: The deadline of one logical call, retries across leader changes included: a failover takes
#: well under a second; 60 s rides out a restart of every master. `None` waits without limit,
#: as the Rust trainer does by default.
DEADLINE_S_DEFAULT = 60.0

#: The queue policy values a submitted job may set (`TaskClient.submit_job`).
POLICY_KEYS = ("chunks_per_task", "task_timeout_min_ms", "timeout_factor", "max_task_failures", "retry_failed_next_pass")

#: What a step of the walk through a job's passes met (`TaskClient.step`).
StepKind = _native.StepKind

#: A round of several clients' steps started at once (`TaskClient.step_ahead(together=)`),
#: whose asks go to the leader in one call: `AskGather(count)`, `count` from 1 to
#: `ASKS_TOGETHER_MAX`.
AskGather = _native.AskGather

Masters = Union[str, Sequence[str]]
#: A file's path: text or an `os.PathLike` (a `pathlib.Path`).
PathArg = Union[str, "os.PathLike[str]"]
#: An answer of the masters as JSON (a job's status, a submitted job, a restore).
JsonObject = Dict[str, Any]


#: The widths the masters take each count in (bits): a value outside is refused here, naming it.
_BITS = {"passes": 32, "chunks_per_task": 32, "timeout_factor": 32, "max_task_failures": 32}


def _count(field: str, value) -> int:
    """`value` as the unsigned whole number `field` is on the wire (`_BITS`, else 64 bits), or
    `InvalidArgument` naming the field (not an `OverflowError` from the conversion; text is
    refused, as `"5"` may be a typing slip for anything)."""
    try:
        number = None if isinstance(value, (str, bytes)) else int(value)
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(value, bool) or isinstance(value, float) and number != value:
        raise InvalidArgument(f"{field}: a whole number, not {value!r}")
    bits = _BITS.get(field, 64)
    if not 0 <= number < 1 << bits:
        raise InvalidArgument(f"{field}: {number} is not an unsigned {bits}-bit whole number")
    return number


def _flag(field: str, value) -> bool:
    """`value` as a truth value: `True` or `False` (or NumPy's), never a string or a number,
    whose truth says nothing (`"false"` is true)."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return bool(value)
    raise InvalidArgument(f"{field}: True or False, not {value!r}")


def _policy(policy: dict) -> JsonObject:
    """The queue policy's values checked (`retry_failed_next_pass` a truth value, the rest counts)."""
    return {key: _flag(key, value) if key == "retry_failed_next_pass" else _count(key, value) for key, value in policy.items()}


def _shuffle_seed(shuffle: bool, seed: int) -> Optional[int]:
    """The wire's shuffle seed: `seed` (an unsigned 64-bit integer) when shuffling, else none."""
    return _count("seed", seed) if shuffle else None


#: The most finished tasks one `TaskClient.step` reports with its ask (the masters' bound).
FINISHED_PER_STEP_MAX: int = _native.FINISHED_PER_STEP_MAX
#: The most steps started at once (`TaskClient.step_ahead(together=)`) the masters write together.
ASKS_TOGETHER_MAX: int = _native.ASKS_TOGETHER_MAX


def _receipts(finished) -> List[Tuple[int, int]]:
    """`(task_id, dispatch)` of each of `finished` (`Task`s or receipts), checked."""
    receipts = [(each.task_id, each.dispatch) if isinstance(each, Task) else (int(each[0]), int(each[1])) for each in finished]
    if len(receipts) > FINISHED_PER_STEP_MAX:
        raise InvalidArgument(f"finished: {len(receipts)} tasks in one step; at most {FINISHED_PER_STEP_MAX} go with one")
    return receipts


def master_list(masters: Masters) -> List[str]:
    """`"a:1,b:2"` or `["a:1", "b:2"]` as a list of addresses."""
    if isinstance(masters, str):
        masters = masters.split(",")
    addresses = [str(address).strip() for address in masters if str(address).strip()]
    if not addresses:
        raise InvalidArgument("no master addresses given")
    return addresses


def _path(value: Optional[PathArg]) -> Optional[str]:
    return None if value is None else os.fspath(value)


def _patterns(value: Union[PathArg, Sequence[PathArg]]) -> List[str]:
    """One path or glob, or several, as a list of texts."""
    return [os.fspath(pattern) for pattern in ([value] if isinstance(value, (str, os.PathLike)) else value)]


def status(
    masters: Masters,
    *,
    job: Optional[str] = None,
    tls_ca: Optional[PathArg] = None,
    tls_cert: Optional[PathArg] = None,
    tls_key: Optional[PathArg] = None,
    token_file: Optional[PathArg] = None,
    deadline_s: Optional[float] = DEADLINE_S_DEFAULT,
) -> JsonObject:
    """Job `job` (by default the group's only job) as the leader sees it (the keys of
    `raftrain status --json`), without registering a trainer."""
    text = _native.status_json(
        master_list(masters),
        job=job or "",
        tls_ca=_path(tls_ca),
        tls_cert=_path(tls_cert),
        tls_key=_path(tls_key),
        token_file=_path(token_file),
        deadline_s=deadline_s,
    )
    return _status(text)


def register_together(clients: Sequence["TaskClient"]) -> List[int]:
    """Registers `clients` (those not registered yet) at once, each from a thread of its own,
    and returns their trainer ids: the registrations reach the leader together and share
    entries, where one after the other each waited for a replicated write of its own (a
    loader's nine before its first task). Raises the first failure."""
    return _together(clients, lambda client: client.trainer_id)


def leave_together(clients: Sequence["TaskClient"]) -> List[int]:
    """`TaskClient.leave` of `clients` at once, each from a thread of its own (their writes
    share entries): how many tasks each gave back. Raises the first failure."""
    return _together(clients, TaskClient.leave)


def _together(clients: Sequence["TaskClient"], call: Callable[["TaskClient"], T]) -> List[T]:
    """`call` of each of `clients`, from a thread each when there are several."""
    if len(clients) < 2:
        return [call(client) for client in clients]
    pool = concurrent.futures.ThreadPoolExecutor(len(clients), thread_name_prefix="raftrain-together")
    try:
        return list(pool.map(call, clients))
    finally:
        # Interrupted (Ctrl-C), the training thread does not wait for the others' calls.
        pool.shutdown(wait=False, cancel_futures=True)


def raise_if_failed(status: JsonObject) -> JsonObject:
    """`status` (of a job), unless the job finished with failed tasks: their data was not
    trained on, so a training loop must not end as if it had been (`TasksFailed` names them)."""
    if status["job_finished"] and status["failed_tasks"]:
        raise TasksFailed(status["failed_tasks"], status.get("job"))
    return status


def _status(text: str) -> JsonObject:
    """The leader's status JSON with `linearizable` as `raftrain status --json` adds it: always
    true here, since only a leader's answer is returned (no leader raises `Unavailable`).
    `members` lists id, addr and role; the command line adds each member's own view."""
    status = json.loads(text)
    status["linearizable"] = True
    return status


class Waiting(enum.Enum):
    """Why a `Wait` step found nothing free."""

    #: The pass's remaining tasks are held by other trainers (or this one's other registrations).
    HELD_ELSEWHERE = "held_elsewhere"
    #: The job has no dataset yet (submitted by another process, or not yet).
    NO_DATASET = "no_dataset"


class Step(NamedTuple):
    """One step of a `TaskClient`'s walk through its job's passes (`TaskClient.step`);
    `finished`: per task the step reported finished first, whether it was accepted."""

    kind: "StepKind"
    task: Optional["Task"]
    pass_index: int
    ended_pass: Optional[int]
    waiting_for: Optional[Waiting]
    retry_in_s: float
    finished: Tuple[bool, ...] = ()


class PendingStep:
    """A step of `TaskClient.step_ahead` under way: `done()` says whether its answer is in,
    `result()` waits for it (the GIL released) and returns the `Step`, or raises the step's
    error."""

    def __init__(self, client: "TaskClient", native: Any):
        self._client = client
        self._native = native
        self._step: Optional[Step] = None

    def done(self) -> bool:
        return self._step is not None or self._native.done()

    def result(self) -> "Step":
        if self._step is None:
            self._step = self._client._step_of(self._native.result())
        return self._step


class TaskClient:
    """One trainer of a job: `report_dataset`, `tasks()`, `record_eval`, `status()`,
    `checkpoint()` and `restore()`.

    `job` names the job (one of several a master group runs; `raftrain job submit` makes one,
    and so does this client's first dataset report); by default, the group's only job. The
    trainer registers when it first asks for a task (or reads `trainer_id`), so a process may
    report the dataset, and so submit its job, first.

    `trainer_id` makes this client act as a trainer another client of the job registered and
    keeps alive (its heartbeats): a DataLoader worker asking for tasks as a trainer its
    training process lent it, so that each new worker does not register one of its own."""

    def __init__(
        self,
        masters: Masters,
        *,
        name: Optional[str] = None,
        job: Optional[str] = None,
        tls_ca: Optional[PathArg] = None,
        tls_cert: Optional[PathArg] = None,
        tls_key: Optional[PathArg] = None,
        token_file: Optional[PathArg] = None,
        deadline_s: Optional[float] = DEADLINE_S_DEFAULT,
        trainer_id: Optional[int] = None,
    ):
        self.job: Optional[str] = job
        self._native = _native.TaskClient(
            master_list(masters),
            name or f"python-{socket.gethostname()}-{os.getpid()}",
            job=job or "",
            tls_ca=_path(tls_ca),
            tls_cert=_path(tls_cert),
            tls_key=_path(tls_key),
            token_file=_path(token_file),
            deadline_s=deadline_s,
            trainer_id=None if trainer_id is None else _count("trainer_id", trainer_id),
        )

    @property
    def trainer_id(self) -> int:
        """The id the master knows this trainer by (a new one if it had to register again)."""
        return self._native.trainer_id

    @property
    def pass_index(self) -> int:
        """The pass this trainer takes tasks of."""
        return self._native.pass_index

    def submit_job(
        self,
        name: str,
        *,
        passes: int,
        records: Optional[Union[PathArg, Sequence[PathArg]]] = None,
        index: Optional[Tuple[int, int]] = None,
        restart: bool = False,
        shuffle: bool = False,
        seed: int = 0,
        **policy: Any,
    ) -> JsonObject:
        """Submits job `name`: RecordIO files `records` (paths or globs, as the masters see
        them) or an index range `index=(size, shard_size)`, read `passes` times, with the queue
        policy values it sets instead of the masters' flags: `task_timeout_min_ms`,
        `timeout_factor`, `max_task_failures`, `chunks_per_task`, `retry_failed_next_pass`
        (as `raftrain job submit` takes them). The same spec again changes nothing; another
        spec under a used name is refused (`InvalidArgument`) naming what differs. With
        `restart=True`, a job of this name that ended (finished or cancelled) gets a new
        incarnation (a new job id) with this spec, which may differ from the old one's; a
        running job is joined, never replaced. `shuffle=True` shuffles the job with `seed` (see
        `report_dataset`). Returns `{"tasks", "chunks", "records"}`."""
        self._same_job(name)
        unknown = sorted(set(policy) - set(POLICY_KEYS))
        if unknown:
            raise InvalidArgument(f"unknown policy keys {unknown}; known: {list(POLICY_KEYS)}")
        patterns = None if records is None else _patterns(records)
        index = None if index is None else (_count("size", index[0]), _count("shard_size", index[1]))
        shuffle_seed = _shuffle_seed(shuffle, seed)
        tasks, chunks, count = self._native.submit_job(
            str(name),
            _count("passes", passes),
            patterns=patterns,
            index=index,
            restart=bool(restart),
            shuffle_seed=shuffle_seed,
            **_policy(policy),
        )
        return {"tasks": tasks, "chunks": chunks, "records": count}

    def submit(self, spec: Mapping[str, Any], *, restart: bool = False) -> JsonObject:
        """Submits a job from its spec, as `raftrain job submit --spec FILE` reads it: `name`,
        `passes`, RecordIO files `dataset` or an index range `index` and `shard-size`,
        `shuffle` and `seed`, and the queue policy keys (`task-timeout-min-ms`, ...; `_` or `-`
        alike). `restart=True` is `job submit --restart`: a job of this name that ended is
        trained again as a new incarnation. Returns `{"tasks", "chunks", "records"}`."""
        if not isinstance(spec, Mapping):
            raise InvalidArgument(f"a spec is a dict of its keys, not {type(spec).__name__}")
        fields = {}
        for key, value in spec.items():
            field = str(key).replace("-", "_")
            if field in fields:
                raise InvalidArgument(f"spec key {key!r} given twice (`-` and `_` spell one key)")
            fields[field] = value
        known = {"name", "passes", "dataset", "index", "shard_size", "shuffle", "seed", *POLICY_KEYS}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise InvalidArgument(f"unknown spec keys {unknown}")
        if "name" not in fields or "passes" not in fields:
            raise InvalidArgument("a spec needs a name and passes")
        index = None
        if fields.get("index") is not None:
            if fields.get("shard_size") is None:
                raise InvalidArgument("shard-size: an index dataset needs one")
            index = (_count("index", fields["index"]), _count("shard-size", fields["shard_size"]))
        if "seed" in fields and not fields.get("shuffle", False):
            raise InvalidArgument("seed: only a shuffled job has one (give shuffle: True)")
        dataset = fields.get("dataset")
        if dataset is not None and not isinstance(dataset, (list, tuple)):
            raise InvalidArgument(f"dataset: a list of RecordIO paths or globs, not {dataset!r}")
        policy = {key: fields[key] for key in POLICY_KEYS if key in fields}
        return self.submit_job(
            fields["name"],
            passes=fields["passes"],
            records=fields.get("dataset"),
            index=index,
            restart=restart,
            shuffle=_flag("shuffle", fields.get("shuffle", False)),
            seed=_count("seed", fields.get("seed", 0)),
            **policy,
        )

    def report_dataset(
        self,
        patterns: Union[PathArg, Sequence[PathArg]],
        *,
        passes: int,
        job: Optional[str] = None,
        restart: bool = False,
        shuffle: bool = False,
        seed: int = 0,
    ) -> JsonObject:
        """Reports the job's RecordIO files (paths or globs, as the masters see them) to be
        read `passes` times, as job `job` (default: this client's job, else "python"): it
        submits the job when none of that name exists; a repeat answers the accepted sizes.
        `restart=True` trains a job that ended again, as a new incarnation (`submit_job`).

        `shuffle=True`: the masters hand each pass's tasks out in a permutation of `seed` and
        the pass (another one each pass; replicated, so a failover or a restore replays it),
        and `Task.sample_order()` orders each task's samples. The seed is part of the job: a
        report with another one (or without shuffle) is refused naming both."""
        if job is not None:
            self._same_job(job)
        listed = _patterns(patterns)
        job = job or self.job or "python"
        if restart:
            return self.submit_job(job, passes=passes, records=listed, restart=True, shuffle=shuffle, seed=seed)
        shuffle_seed = _shuffle_seed(shuffle, seed)
        tasks, chunks, records = self._native.report_dataset(job, listed, _count("passes", passes), shuffle_seed)
        return {"tasks": tasks, "chunks": chunks, "records": records}

    def report_index_dataset(
        self,
        name: str,
        size: int,
        shard_size: int,
        *,
        passes: int,
        restart: bool = False,
        shuffle: bool = False,
        seed: int = 0,
    ) -> JsonObject:
        """Reports a dataset the masters never read: the indices `[0, size)` in tasks of
        `shard_size` (Parquet row groups, a Hugging Face dataset, webdataset shards, a table:
        anything this process can index). Each task is a range `task.start`..`task.end`. The
        first report of either kind wins; a repeat answers the accepted sizes. `restart=True`
        trains a job that ended again, as a new incarnation (`submit_job`); a running one is
        joined. `shuffle` and `seed` as in `report_dataset`."""
        self._same_job(name)
        size, shard_size = _count("size", size), _count("shard_size", shard_size)
        if restart:
            submitted = self.submit_job(str(name), passes=passes, index=(size, shard_size), restart=True, shuffle=shuffle, seed=seed)
            return {"tasks": submitted["tasks"], "size": size, "shard_size": shard_size}
        shuffle_seed = _shuffle_seed(shuffle, seed)
        tasks = self._native.report_index_dataset(str(name), size, shard_size, _count("passes", passes), shuffle_seed)
        return {"tasks": tasks, "size": size, "shard_size": shard_size}

    def next_task(self, finished: Sequence[Union["Task", Tuple[int, int]]] = ()) -> Optional["Task"]:
        """The next task (waiting while none is free, moving through passes), or `None` once
        the job finished or was cancelled. Until it is reported, the master answers the same
        task again. `finished` (tasks done since the last ask) are reported finished with the
        first ask, in the same write (see `step`)."""
        while True:
            step = self.step(finished)
            finished = ()
            if step.kind == StepKind.Task:
                return step.task
            if step.kind in (StepKind.Finished, StepKind.Cancelled):
                return None
            if step.kind == StepKind.Wait:
                time.sleep(step.retry_in_s)

    def progress(self, task_id: int, dispatch: int) -> Optional[float]:
        """Reports that this trainer, or the training loop it feeds, is still at work on task
        `task_id` under `dispatch` (see `Task.progress`): the timeout in seconds, or `None`
        when the task is no longer held under that dispatch."""
        return self._native.progress(int(task_id), int(dispatch))

    def _same_job(self, name: str) -> None:
        """Refuses to report or submit job `name` from a client of another job: one way to
        name a job, refused when two disagree."""
        if self.job and str(name) != self.job:
            raise InvalidArgument(f"this client is job {self.job!r}'s; it cannot report or submit job {name!r}")

    def go_to(self, pass_index: int) -> None:
        """Walks pass `pass_index` from now on (another registration of this process learned
        that the job's pass moved)."""
        self._native.go_to(int(pass_index))

    def step(self, finished: Sequence[Union["Task", Tuple[int, int]]] = ()) -> "Step":
        """One step of the walk through the job's passes, without waiting: a `Step` whose
        `kind` (a `StepKind`) is `Task` (`step.task`), `PassOver` (`step.ended_pass` is over;
        the walk goes on with `step.pass_index`), `PassRewound` (a restore put the job back to
        `step.pass_index`), `Wait` (nothing is free: `step.waiting_for`, a `Waiting`, says why; ask again
        after `step.retry_in_s`), `Finished` or `Cancelled`.

        `finished`: tasks done since the last step (`Task`s of this client, or `(task_id,
        dispatch)` receipts of any trainer of the job, at most `FINISHED_PER_STEP_MAX`),
        reported finished before the ask in the same replicated write (a task hand-off in one
        write; masters of an older build take them one by one): `step.finished` says which were
        accepted, as `Task.finish` would."""
        receipts = _receipts(finished)
        native = self._native.step(receipts) if receipts else self._native.step()
        for each in finished:
            if isinstance(each, Task):
                each.reported = "finished"
        return self._step_of(native)

    def step_ahead(self, finished: Sequence[Tuple[int, int]] = (), together: Union[int, "AskGather"] = 1) -> "PendingStep":
        """`step(finished)` started in the background, returning at once (`finished`:
        receipts only): `result()` of what it returns is the `Step`. No Python thread waits
        for it meanwhile, so the training thread is never interrupted for its answer.
        `together`: how many clients' steps (this one included, at most
        `ASKS_TOGETHER_MAX`) are started at once, one right after the other: the masters then
        write them together (one replicated entry instead of one each). Or the `AskGather`
        of those steps, each client's started with it: their asks also go in one call
        (masters of an older build take them one call each)."""
        if isinstance(together, AskGather):
            return PendingStep(self, self._native.step_ahead(_receipts(finished), together.count, together))
        if isinstance(together, bool) or not isinstance(together, int):
            raise TypeError(f"together={together!r}: a count of steps or an AskGather")
        if not 1 <= together <= ASKS_TOGETHER_MAX:
            raise InvalidArgument(f"together={together}: from 1 to {ASKS_TOGETHER_MAX} steps are started at once")
        return PendingStep(self, self._native.step_ahead(_receipts(finished), together))

    def _step_of(self, native) -> "Step":
        task = None if native.task is None else Task(self, native.task)
        waiting_for = None if native.waiting_for is None else Waiting(native.waiting_for)
        accepted = tuple(native.finished)
        return Step(native.kind, task, native.pass_index, native.ended_pass, waiting_for, native.retry_in_s, accepted)

    def tasks(self) -> Iterator["Task"]:
        """Every task this trainer gets, across passes, until the job finishes. Report each
        (`finish`, `fail`, or use it as a context manager) before taking the next. A task a
        `with` block ends normally is reported finished with the ask for the next one, in the
        same replicated write (a hand-off in one write); if the loop stops instead, it is
        reported on its own then. A job that finished with failed tasks raises `TasksFailed`
        naming them and why: their data was not trained on."""
        pending: List[Task] = []
        try:
            while True:
                # Taken out first: a step that raised may or may not have reported them (a
                # task not reported is trained again), and they are not sent twice.
                finished, pending = pending, []
                task = self.next_task(finished)
                if task is None:
                    raise_if_failed(self.status(lists=False))
                    return
                task._finish_later = pending.append
                yield task
        finally:
            for task in pending:
                self._native.finish(task.task_id, task.dispatch)

    def record_eval(self, pass_index: int, loss: float, accuracy: float) -> None:
        """Records an evaluation of the model after pass `pass_index` (accuracy in 0..1)."""
        self._native.record_eval(int(pass_index), float(loss), float(accuracy))

    def jobs(self) -> List[JsonObject]:
        """Every job of the group (running, finished, cancelled), as `raftrain job list
        --json` shows them: `name`, `job_id` (the incarnation, never reused), `state`,
        `pass`, `passes`, `tasks`, `done`, ..."""
        return json.loads(self._native.jobs_json())["jobs"]

    def cancel(self, job: Optional[str] = None) -> None:
        """Cancels `job` (by default this client's): its trainers and pservers stop and it
        never runs again. Cancelling a job that already ended changes nothing."""
        name = job if job is not None else self.job
        if not name:
            raise InvalidArgument("name the job to cancel: this client was made without job=")
        self._native.cancel_job(name)

    def status(self, lists: bool = True) -> JsonObject:
        """The job as the leader sees it: the keys of `raftrain status --json`. `lists=False`
        leaves out `jobs` and `rendezvous` (every job and rendezvous run of the group): one
        linearizable read, a heartbeat round of the leader's, instead of three, for a loop that
        reads its job's state every pass."""
        return _status(self._native.status_json(_flag("lists", lists)))

    def checkpoint(self) -> int:
        """Records the job's progress (its pass and which of its tasks are done) as one
        replicated entry and returns its id: keep it with your model checkpoint, and
        `restore(id)` puts the data position back with the model."""
        checkpoint_id, _pass, _done = self._native.checkpoint()
        return checkpoint_id

    def restore(self, checkpoint_id: int, data_only: bool = False) -> JsonObject:
        """Puts the job back to progress checkpoint `checkpoint_id`: the tasks done after it
        are done again (at least once). A job with pservers gets their checkpoints for it back
        first (unless `data_only`): `reloading` pservers reload, and no task is handed out
        until they have (`todo` is then counted once the queue goes back). Returns
        `{"pass_index", "todo", "reloading"}`."""
        checkpoint_id = _count("checkpoint_id", checkpoint_id)
        pass_index, todo, reloading = self._native.restore(checkpoint_id, _flag("data_only", data_only))
        self._native.go_to(pass_index)
        return {"pass_index": pass_index, "todo": todo, "reloading": reloading}

    def close(self) -> None:
        """Stops heartbeating; a task still held goes back to the queue when its lease ends.
        A closed client asks for no more tasks (`next_task`, `step` and `step_ahead` raise
        `FailedPrecondition`); its reports still go."""
        self._native.close()

    def leave(self) -> int:
        """Leaves the job (a planned stop): `close`, and the tasks this trainer holds go back
        to the queue now rather than when its lease ends, counting no failure against them.
        Returns how many went back (0 when it never registered: nothing is sent)."""
        return self._native.leave()

    def __enter__(self) -> "TaskClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
