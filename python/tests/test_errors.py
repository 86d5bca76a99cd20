"""Clear exceptions, never a hang or a panic: bad input is `InvalidArgument` (a `ValueError`
too), a group without a quorum is `DeadlineExceeded` (an `Unavailable`) within the deadline,
the server's own refusals keep its message, a client inherited through `fork` refuses to be
used instead of hanging, and a forked child's own client answers."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

import raftrain

from cluster import free_addr
from data import write_blobs


def test_bad_addresses_and_arguments_are_invalid_arguments(tmp_path):
    """Refused before anything is sent: no addresses, an address that is not one (no port, a
    scheme), a deadline out of range, TLS files that do not exist (the file is named), an
    unknown fault, a `TaskDataset`'s arguments of the wrong kind (each named, not a bare
    `TypeError` or `IndexError`)."""
    with pytest.raises(raftrain.InvalidArgument):
        raftrain.TaskClient([])
    with pytest.raises(raftrain.InvalidArgument) as bad:
        raftrain.TaskClient("not an address at all")
    assert isinstance(bad.value, ValueError) and bad.value.code == "INVALID_ARGUMENT"
    # No port, or a scheme: refused at once, naming what is wrong, not retried for a minute.
    for address, reason in (("localhost", "no port"), ("http://localhost:7000", "scheme")):
        started = time.monotonic()
        with pytest.raises(raftrain.InvalidArgument, match=reason):
            raftrain.TaskClient(address)
        assert time.monotonic() - started < 5
    with pytest.raises(raftrain.InvalidArgument) as empty:
        raftrain.TaskClient([])
    assert empty.value.code == "INVALID_ARGUMENT", "an argument error says so"
    client = raftrain.TaskClient(free_addr(), job="a")
    with pytest.raises(raftrain.InvalidArgument, match="job 'a'.*job 'b'"):
        client.report_index_dataset("b", 10, 2, passes=1)
    with pytest.raises(raftrain.InvalidArgument, match="job 'a'.*job 'b'"):
        client.submit_job("b", index=(10, 2), passes=1)
    from raftrain.torch import TaskDataset

    with pytest.raises(raftrain.InvalidArgument, match="give one"):
        TaskDataset(free_addr(), index=("a", 10, 2), read=lambda start, end: None, batch_size=2, job="b")
    read = lambda start, end: None  # noqa: E731
    for arguments, named in [
        (dict(index=(10, 5)), r"index: \(name, size, shard_size\), not \(10, 5\)"),
        (dict(index="a"), r"index: \(name, size, shard_size\)"),
        (dict(index=(10, 5, 2)), "index: the job's name first, as text, not 10"),
        (dict(index=("a", "10", 2)), "size: a whole number, not '10'"),
        (dict(index=("a", 10, 2), batch_size="5"), "batch_size: a whole number, not '5'"),
        (dict(index=("a", 10, 2), batch_size=0), "batch_size must be at least 1"),
        (dict(index=("a", 10, 2), batch_size=2, shuffle="false", read_indices=read), "shuffle: True or False, not 'false'"),
        (dict(index=("a", 10, 2), batch_size=2, seed=1.5), "seed: a whole number, not 1.5"),
        (dict(index=("a", 10, 2), batch_size=2, restart=1), "restart: True or False, not 1"),
    ]:
        with pytest.raises(raftrain.InvalidArgument, match=named):
            TaskDataset(free_addr(), read=read, **arguments)
    with pytest.raises(raftrain.InvalidArgument, match="deadline_s"):
        raftrain.status(free_addr(), deadline_s=-1)
    missing = tmp_path / "missing.pem"
    with pytest.raises(raftrain.InvalidArgument, match="missing.pem"):
        raftrain.status(free_addr(), tls_ca=missing)


def test_the_dataloader_options_that_are_the_datasets_are_refused_naming_what_to_give():
    """`loader(shuffle=True)` and the like would otherwise raise torch's messages about an
    IterableDataset or `batch_size=None`, which the user never gave; a batch size above the
    shard size warns that batches stay within a task."""
    import warnings

    from raftrain.torch import TaskDataset

    read = lambda start, end: None  # noqa: E731
    dataset = TaskDataset(free_addr(), index=("options", 10, 5), read=read, batch_size=5)
    for option, value, named in [
        ("batch_size", 8, "give batch_size to the TaskDataset"),
        ("shuffle", True, r"TaskDataset\(\.\.\., shuffle=True, seed=\.\.\.\)"),
        ("sampler", [1, 2], "takes no sampler"),
        ("batch_sampler", [[1, 2]], "takes no batch_sampler"),
        ("drop_last", True, "multiple of batch_size"),
    ]:
        with pytest.raises(raftrain.InvalidArgument, match=f"{option}=.*{named}"):
            dataset.loader(**{option: value})
    # DataLoader's own defaults, given explicitly, are accepted.
    dataset.loader(shuffle=False, drop_last=False, sampler=None, batch_sampler=None)
    with pytest.warns(UserWarning, match=r"batch_size=64 is more than a task of job 'small' holds \(shard_size=2\)"):
        TaskDataset(free_addr(), index=("small", 10, 2), read=read)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TaskDataset(free_addr(), index=("even", 10, 2), read=read, batch_size=2)


def test_ddp_of_the_module_inside_the_wrapper_is_refused_naming_the_wrapper():
    """`loader.ddp(model)` takes the DistributedDataParallel the loop steps: given the plain
    module (its `Join` would fail at the first pass with torch's "'Linear' object has no
    attribute 'join_hook'"), it raises at once, saying what to pass."""
    import torch

    from raftrain.torch import TaskDataset

    read = lambda start, end: None  # noqa: E731
    loader = TaskDataset(free_addr(), index=("ddp-module", 10, 5), read=read, batch_size=5).loader()
    with pytest.raises(TypeError, match=r"ddp\(model\): a Linear is not joinable; pass the DistributedDataParallel wrapper"):
        loader.ddp(torch.nn.Linear(4, 2))


def test_an_index_of_no_samples_or_empty_tasks_is_refused_before_anything_else():
    """`index=(name, 0, ...)` or a shard size of 0 is refused at once naming the field, with no
    warning about batches larger than tasks first (nor a round trip to the masters)."""
    import warnings

    from raftrain.torch import TaskDataset

    read = lambda start, end: None  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(raftrain.InvalidArgument, match=r"index: shard_size 0: the samples of a task, at least 1"):
            TaskDataset(free_addr(), index=("empty-tasks", 10, 0), read=read, batch_size=5)
        with pytest.raises(raftrain.InvalidArgument, match=r"index: size 0: the number of samples, at least 1"):
            TaskDataset(free_addr(), index=("no-samples", 0, 5), read=read, batch_size=5)


def test_the_loaders_own_errors_survive_pickling():
    """A DataLoader worker's or a multiprocessing result's exception comes back whole."""
    import pickle

    from raftrain.errors import JobEnded, TasksFailed

    ended = pickle.loads(pickle.dumps(JobEnded("blobs", "finished")))
    assert (type(ended), ended.job, str(ended)) == (JobEnded, "blobs", str(JobEnded("blobs", "finished")))
    failed = TasksFailed([{"task": 3, "reason": "corrupt"}], "blobs")
    again = pickle.loads(pickle.dumps(failed))
    assert (type(again), again.failed_tasks, str(again)) == (TasksFailed, failed.failed_tasks, str(failed))


def test_no_quorum_is_unavailable_within_the_deadline(start_masters):
    """One master of three left: no leader can be elected, and a call fails with
    `DeadlineExceeded` (an `Unavailable`, a `TimeoutError`) saying no leader answered within its
    deadline."""
    group = start_masters()
    group.status()
    group.kill(0)
    group.kill(1)
    client = raftrain.TaskClient(group.masters, deadline_s=2.0)  # registers on first use
    with pytest.raises(raftrain.Unavailable) as raised:
        client.trainer_id
    assert isinstance(raised.value, raftrain.DeadlineExceeded) and isinstance(raised.value, TimeoutError)
    assert raised.value.code == "DEADLINE_EXCEEDED" and "no master leader answered within 2s" in raised.value.message


def test_nothing_listening_is_unavailable():
    """Addresses where nothing listens: `Unavailable`, naming the address tried."""
    with pytest.raises(raftrain.Unavailable) as raised:
        raftrain.status([free_addr(), free_addr()], deadline_s=1.0)
    assert "127.0.0.1" in raised.value.message


def test_the_servers_refusals_keep_their_message(masters, tmp_path):
    """A dataset pattern that matches nothing is refused by the master: `InvalidArgument`
    carrying the master's message, which names the pattern."""
    client = raftrain.TaskClient(masters.masters)
    with pytest.raises(raftrain.InvalidArgument) as raised:
        client.report_dataset(str(tmp_path / "nothing-here-*.recordio"), passes=1)
    assert "nothing-here-" in raised.value.message and "ReportDataset" in raised.value.message
    with pytest.raises(raftrain.InvalidArgument, match="relative to its working directory") as raised:
        client.report_dataset("relative-nothing-*.recordio", passes=1)
    assert "the masters read" in raised.value.message
    with pytest.raises(raftrain.InvalidArgument, match="neither"):
        client._native.fail(1, 1, "a reason", "neither")


def test_a_client_used_after_fork_refuses_instead_of_hanging(masters):
    """A forked child (as a DataLoader worker is) that uses its parent's client is told to make
    its own; a client it makes itself works."""
    parent = raftrain.TaskClient(masters.masters)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        code = 1
        try:
            try:
                parent.status()
            except raftrain.FailedPrecondition as error:
                if "make a new one in this process" in error.message:
                    code = 0 if raftrain.TaskClient(masters.masters).status()["leader"] else 2
            os.write(write, bytes([code]))
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    assert answer == b"\x00", f"child answered {answer!r}"
    assert parent.status()["leader"] is not None, "the parent's client still works"


def test_children_forked_while_the_parent_is_busy_answer_their_first_call(masters, tmp_path):
    """200 children forked one after another while four threads of the parent keep its runtime
    busy (heartbeats, status reads on fresh connections: its threads park and wake all the time), each
    making its own client and reporting the dataset: every child answers. Before tokio was built
    without parking_lot, a child could inherit the parking table's lock held by a parent thread
    and hang in its first call (twice in 400 forks of a stress run; once in CI, as a DataLoader
    worker). A stress, not a sure trap: four runs of it against the old build did not hang."""
    write_blobs(tmp_path / "train.recordio", 50, seed=5, max_chunk_bytes=1000)
    records = str(tmp_path / "train.recordio")
    raftrain.TaskClient(masters.masters, name="submitter").report_dataset(records, passes=1)
    stop = threading.Event()

    def keep_busy(index: int) -> None:
        trainer = raftrain.TaskClient(masters.masters, name=f"busy-{index}")
        trainer.trainer_id  # registered: its heartbeats run on the runtime too
        while not stop.is_set():
            masters.status()

    busy = [threading.Thread(target=keep_busy, args=(index,), daemon=True) for index in range(4)]
    for thread in busy:
        thread.start()
    try:
        for index in range(200):
            _fork_and_report(masters.masters, records, index)
    finally:
        stop.set()
        for thread in busy:
            thread.join(timeout=30)


def _fork_and_report(masters: str, records: str, index: int) -> None:
    """Forks a child that reports `records` with its own client; fails if it does not exit 0
    within 60 s (a hung child is killed first)."""
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 1
        try:
            client = raftrain.TaskClient(masters, name=f"child-{index}", deadline_s=30)
            code = 0 if client.report_dataset(records, passes=1)["tasks"] > 0 else 2
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0, f"child {index} failed"
            return
        time.sleep(0.01)
    stacks = _thread_stacks(pid)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"child {index} (pid {pid}) hung in its first call; its threads:\n{stacks}")


def _thread_stacks(pid: int) -> str:
    """Every thread's stack of process `pid`, as gdb prints them, or why there are none."""
    if shutil.which("gdb") is None:
        return "(no gdb on PATH to print them)"
    command = ["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 30"]
    try:
        printed = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "(gdb did not answer within 60 s)"
    return printed.stdout[-20000:]


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda client: client.report_index_dataset("counts", -5, 4, passes=1), "size"),
        (lambda client: client.report_index_dataset("counts", 10, 2**64, passes=1), "shard_size"),
        (lambda client: client.report_index_dataset("counts", 10, 4, passes=-1), "passes"),
        (lambda client: client.report_index_dataset("counts", 10.5, 4, passes=1), "size"),
        (lambda client: client.submit_job("counts", passes=1, index=(10, 4), max_task_failures=-2), "max_task_failures"),
        (lambda client: client.submit_job("counts", passes=True, index=(10, 4)), "passes"),
        (lambda client: client.report_dataset(["x.recordio"], passes=2**32, job="counts"), "passes"),
    ],
)
def test_a_count_out_of_range_is_refused_naming_its_field(masters, call, field):
    """Negative, fractional, too wide or a flag where a count belongs: `InvalidArgument` (a
    `ValueError`) naming the field, before anything is sent, rather than an `OverflowError`."""
    with raftrain.TaskClient(masters.masters, job="counts") as client:
        with pytest.raises(raftrain.InvalidArgument, match=f"{field}: ") as raised:
            call(client)
        assert isinstance(raised.value, ValueError)
        assert "counts" not in [job["name"] for job in client.jobs()], "nothing was submitted"
