"""`python -m raftrain.bench`: what the Python package costs against the Rust code beside it,
measured in the same run on the same machine (ratios, not absolute figures, on a noisy one).

- RecordIO reading: `Reader` record by record and chunk by chunk, a pure-Python reader of the
  same uncompressed file (zlib's CRC), and `raftrain recordio cat` into /dev/null.
- The task queue: task transitions per second (a GetTask and its TaskFinished count as two) of
  one `TaskClient` against `raftrain bench master` with one Rust client, on three masters.
- The hand-off: milliseconds for one `TaskClient` to report its task finished and take the next
  in one call (one replicated write; p50, p99), and per task for several clients of one
  process doing so at once (their writes share entries).
- `raftrain.torch` (when PyTorch is installed): seconds for a pass of a small MLP fed by
  `TaskLoader` over an index-range job against the same loop fed by a `DataLoader` slicing the
  same batches from the same in-memory tensors, with 0 and 2 workers, batches of 64 and 512
  (and 2 workers, batch 512, tasks of twice `--shard`: fewer, longer tasks, so the workers
  run out of tasks apart): `--passes` of each, alternating, beside the same masters; the
  median of the passes after the first (a training run's passes) and the first pass's ratio
  (it registers the process's trainers and learns the task timeout) apart, each ratio a
  pass's against the other loader's pass beside it (the machine's drift over a run cancels);
  and the CPU the three masters spent during each loader's passes (from /proc).
- `raftrain.torch` with DDP: two ranks' passes through `TaskLoader.ddp(model)` against a
  `DataLoader` of the same batches dealt to the ranks under `Join`, with an even and an odd
  task count (`raftrain/_bench_ddp.py`).

The three masters of each row share the machine's cores with each other and with what is
measured: they run one tokio worker each (`MASTER_WORKER_THREADS`) unless
`RAFTRAIN_WORKER_THREADS` says otherwise.

Needs the `raftrain` binary (`RAFTRAIN_BIN`, or `raftrain` on PATH). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import shutil
import socket
import statistics
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, List, Optional, Sequence, Tuple

from . import TaskClient, status
from ._bench_ddp import bench_ddp
from .task_client import StepKind
from .recordio import Reader, Writer

if TYPE_CHECKING:
    import torch

RECORD_BYTES = 1000
HEADER = struct.Struct("<IIIII")
MAGIC = 0x01020304


def pure_python_records(path: Path) -> Iterator[bytes]:
    """Every record of an uncompressed RecordIO file, parsed in Python (the baseline)."""
    with open(path, "rb") as file:
        while True:
            header = file.read(HEADER.size)
            if not header:
                return
            magic, checksum, compressor, size, count = HEADER.unpack(header)
            payload = file.read(size)
            if magic != MAGIC or compressor != 0 or zlib.crc32(payload) != checksum:
                raise ValueError(f"{path}: bad chunk")
            offset = 0
            for _ in range(count):
                (length,) = struct.unpack_from("<I", payload, offset)
                yield payload[offset + 4 : offset + 4 + length]
                offset += 4 + length


def timed(read: Callable[[], object]) -> float:
    started = time.perf_counter()
    read()
    return time.perf_counter() - started


def bench_reader(binary: str, directory: Path, megabytes: int) -> None:
    path = directory / "bench.recordio"
    record = os.urandom(RECORD_BYTES)
    count = megabytes * (1 << 20) // RECORD_BYTES
    with Writer(path) as writer:
        for _ in range(count):
            writer.write(record)
    size_mb = path.stat().st_size / (1 << 20)
    rows = [
        ("raftrain recordio cat > /dev/null (Rust)", lambda: subprocess.run([binary, "recordio", "cat", str(path)], stdout=subprocess.DEVNULL, check=True)),
        ("Reader, chunk by chunk", lambda: sum(len(chunk) for chunk in Reader(path).chunks())),
        ("Reader, record by record", lambda: sum(1 for _ in Reader(path))),
        ("pure Python (struct, zlib.crc32)", lambda: sum(1 for _ in pure_python_records(path))),
    ]
    print(f"\nRecordIO: {count} records of {RECORD_BYTES} bytes ({size_mb:.0f} MB, no compression), best of 3\n")
    print("| reader | MB/s | vs Rust |\n| --- | ---: | ---: |")
    baseline = None
    for name, read in rows:
        seconds = min(timed(read) for _ in range(3))
        rate = size_mb / seconds
        baseline = baseline or rate
        print(f"| {name} | {rate:,.0f} | {rate / baseline:.2f} |")


def free_addr() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


#: Tokio workers of each of the three masters, which share this machine's cores with each other
#: and with the loop measured (unless `RAFTRAIN_WORKER_THREADS` says otherwise): one each, as
#: `raftrain master --worker-threads` advises where several servers share few cores (what it
#: changed for one hand-off on 2 cores: BENCHMARKS.md).
MASTER_WORKER_THREADS = 1


@contextlib.contextmanager
def three_masters(binary: str, directory: Path, extra_args: Sequence[str] = (), processes: Optional[list] = None):
    """Three `raftrain master` processes on loopback, `MASTER_WORKER_THREADS` workers each (each
    given `extra_args` too), killed on exit; yields their addresses (and puts the processes in
    `processes`, given)."""
    addrs = [free_addr() for _ in range(3)]
    peers = ",".join(f"{index + 1}={addr}" for index, addr in enumerate(addrs))
    masters = [] if processes is None else processes
    workers = [] if os.environ.get("RAFTRAIN_WORKER_THREADS") else ["--worker-threads", str(MASTER_WORKER_THREADS)]
    try:
        for index, addr in enumerate(addrs):
            args = [binary, "master", "--id", str(index + 1), "--listen", addr, "--peers", peers, "--data-dir", str(directory / f"m{index}"), *workers, *extra_args]
            masters.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        status(addrs)
        yield addrs
    finally:
        for master in masters:
            master.kill()
            master.wait()


def bench_tasks(binary: str, directory: Path, tasks: int, seconds: float) -> None:
    with three_masters(binary, directory / "tasks") as addrs:
        path = directory / "tasks.recordio"
        with Writer(path, max_chunk_bytes=1) as writer:  # one record, one chunk, one task each
            for index in range(tasks):
                writer.write(index.to_bytes(4, "little"))
        client = TaskClient(addrs, name="bench")
        client.report_dataset(str(path), passes=1000)
        transitions = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            task = client.next_task()
            if task is None:
                break  # the job finished (its passes ran out)
            task.finish()
            transitions += 2
        python_rate = transitions / (time.perf_counter() - started)
    print(f"\nTask queue: one client, {tasks} tasks of one chunk, three masters, {seconds:.0f} s\n")
    print(f"| client | transitions/s |\n| --- | ---: |\n| TaskClient (Python) | {python_rate:,.0f} |")
    print("\nThe Rust client on the same machine (`raftrain bench master`, 1 client row):\n", flush=True)
    subprocess.run(
        [binary, "bench", "master", "--tasks", str(tasks), "--clients", "1", "--seconds", str(int(seconds)), "--failovers", "0"],
        check=True,
    )


class _SlicedTasks:
    """The baseline's dataset: the same batches a `TaskLoader` yields (tasks of `shard` rows cut
    into `batch` rows, never across a task), sliced from in-memory tensors with no master;
    DataLoader workers split the tasks between them."""

    def __init__(self, rows, labels, shard: int, batch: int):
        self.rows, self.labels, self.shard, self.batch = rows, labels, shard, batch

    def __iter__(self):
        import torch.utils.data

        worker = torch.utils.data.get_worker_info()
        workers, index = (1, 0) if worker is None else (worker.num_workers, worker.id)
        return task_batches(self.rows, self.labels, self.shard, self.batch, index, workers)


def task_batches(rows: "torch.Tensor", labels: "torch.Tensor", shard: int, batch: int, index: int, count: int) -> Iterator[Tuple["torch.Tensor", "torch.Tensor"]]:
    """The batches of tasks `index`, `index + count`, ... (of `shard` rows each, the last one
    short) cut into `batch` rows, never across a task: a baseline's share of the tasks."""
    for task_start in range(index * shard, len(rows), count * shard):
        task_end = min(task_start + shard, len(rows))
        for start in range(task_start, task_end, batch):
            end = min(start + batch, task_end)
            yield rows[start:end], labels[start:end]


#: The benchmarks' model: an MLP of these widths (features, hidden, classes).
MLP_WIDTHS = (256, 256, 10)


def mlp() -> "torch.nn.Sequential":
    """A new `MLP_WIDTHS` model."""
    import torch

    features, hidden, classes = MLP_WIDTHS
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes))


class _Rows:
    """`read(start, end)` over in-memory tensors (a class, so spawned workers get it)."""

    def __init__(self, rows, labels):
        self.rows, self.labels = rows, labels

    def __call__(self, start: int, end: int):
        return self.rows[start:end], self.labels[start:end]


def bench_torch(binary: str, directory: Path, samples: int, shard: int, passes: int = 5) -> None:
    try:
        import torch
        from torch.utils.data import DataLoader, IterableDataset

        from .torch import TaskDataset
    except ImportError:
        print("\nraftrain.torch: PyTorch is not installed; skipped")
        return
    torch.manual_seed(0)
    torch.set_num_threads(1)
    features, hidden, classes = MLP_WIDTHS
    rows = torch.randn(samples, features)
    labels = torch.randint(0, classes, (samples,))

    def train(batches, masters) -> Tuple[float, Optional[float], float]:
        """Seconds for one pass of the loop over `batches`, the CPU seconds the `masters`
        (processes) spent meanwhile (`None` where /proc cannot tell), and the seconds of the
        pass the loop waited for its batches (in `iter()` and `next()`, the last one that
        ended the pass included)."""
        net = mlp()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
        cpu = _cpu_seconds(masters)
        started = time.perf_counter()
        each = iter(batches)
        waited = time.perf_counter() - started
        while True:
            asked = time.perf_counter()
            batch = next(each, None)
            waited += time.perf_counter() - asked
            if batch is None:
                break
            x, y = batch
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            optimizer.step()
        seconds = time.perf_counter() - started
        after = _cpu_seconds(masters)
        return seconds, (None if cpu is None or after is None else after - cpu), waited

    class Sliced(_SlicedTasks, IterableDataset):
        pass

    print(f"\nraftrain.torch: passes of an MLP {features}-{hidden}-{classes} over {samples} in-memory samples in tasks of the size shown,")
    print(f"{passes} of each loader beside the same three masters, in pairs of a pass of each; seconds the median of passes 2-{passes};")
    print(f"vs DataLoader: of passes 2-{passes}, each DataLoader pass's seconds over its pair's TaskLoader pass (adjacent passes: the")
    print("machine's drift over the run cancels), the median of the pairs run DataLoader first and that of the pairs run TaskLoader")
    print("first (the pairs run in turn in either order, as neither loader's pass always follows the other's), averaged: what")
    print("a pass pays for the one before it cancels (to three places: the goal is 0.95x); the masters' CPU seconds (all three, user and system)")
    print("during a pass of each, the median of passes 2 on; the milliseconds of a pass the loop waited in iter() and next() for")
    print("its batches, the median of passes 2 on; and vs DataLoader over the pairs of passes 2 on that ran the DataLoader first,")
    print("and over those that ran the TaskLoader first\n")
    print("| workers | batch | task | DataLoader slicing the same batches, s | TaskLoader, s | vs DataLoader | first pass | masters' CPU, DataLoader / TaskLoader, s | waiting for batches, DataLoader / TaskLoader, ms | vs DataLoader, DataLoader first / TaskLoader first |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows_of = [(0, 64, shard), (0, 512, shard), (2, 64, shard), (2, 512, shard), (2, 512, 2 * shard)]
    for number, (workers, batch, task_size) in enumerate(rows_of):
        masters: list = []
        with three_masters(binary, directory / f"torch-{number}", processes=masters) as addrs:
            dataset = TaskDataset(addrs, index=(f"bench{number}", samples, task_size), read=_Rows(rows, labels), batch_size=batch, passes=passes)
            loader = dataset.loader(num_workers=workers)
            loader.job_finished  # the job is submitted before the clock starts
            plain: List[Tuple[float, Optional[float], float]] = []
            through_tasks: List[Tuple[float, Optional[float], float]] = []
            for pass_number in range(passes):
                baseline = DataLoader(Sliced(rows, labels, task_size, batch), batch_size=None, num_workers=workers)
                # Pairs in turn DataLoader first and TaskLoader first, so that neither loader's
                # passes all come right after the other's (the masters idle for a pass before,
                # or finishing the other's work): in some runs the pairs of one order gave ratios
                # several hundredths apart from the other's, one way or the other (the last
                # column shows both). The first pair runs the DataLoader first, as before.
                pair = [(plain, baseline), (through_tasks, loader)]
                for runs, batches in pair if pass_number % 2 == 0 else reversed(pair):
                    runs.append(train(batches, masters))
        seconds = [[each[0] for each in runs] for runs in (plain, through_tasks)]
        later = [_later(runs) for runs in seconds]
        ratios = [baseline / tasks for baseline, tasks in zip(*seconds)]
        cpu = " / ".join(_median_cpu(runs) for runs in (plain, through_tasks))
        waited = " / ".join(f"{_later([each[2] for each in runs]) * 1000:.1f}" for runs in (plain, through_tasks))
        print(f"| {workers} | {batch} | {task_size} | {later[0]:.2f} | {later[1]:.2f} | {_balanced(ratios):.3f}x | {ratios[0]:.2f}x | {cpu} | {waited} | {_by_order(ratios)} |", flush=True)


def _orders(ratios: Sequence[float]) -> Tuple[Sequence[float], Sequence[float]]:
    """The ratios of passes 2 on whose pair ran the `DataLoader` first (the odd passes), and
    those of the pairs that ran the `TaskLoader` first."""
    return ratios[2::2], ratios[1::2]


def _by_order(ratios: Sequence[float]) -> str:
    """The median of each of `_orders` (`-` where there is none)."""
    return " / ".join(f"{statistics.median(order):.3f}x" if order else "-" for order in _orders(ratios))


def _balanced(ratios: Sequence[float]) -> float:
    """The mean of the medians of `_orders` (of the one, where only one has pairs). With
    workers, on some runs the pairs of one order gave ratios several hundredths from the
    other's, each order's clustered (BENCHMARKS.md; why is not known: in one probe a pass that
    followed the other loader's was the slower, for either loader): the median of them all
    then fell anywhere between the two clusters, while the mean of the two orders cancels what
    a pass pays for the one before it."""
    medians = [statistics.median(order) for order in _orders(ratios) if order]
    return sum(medians) / len(medians)


def _later(runs: Sequence[float]) -> float:
    """The median of `runs` but the first (the first alone when there is no other)."""
    return statistics.median(runs[1:]) if len(runs) > 1 else runs[0]


def _cpu_seconds(processes) -> Optional[float]:
    """The CPU seconds (user and system) `processes` spent so far, from /proc (`None` where
    there is none, or a process is gone)."""
    total = 0
    try:
        for process in processes:
            with open(f"/proc/{process.pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None
    return total / os.sysconf("SC_CLK_TCK")


def _median_cpu(runs) -> str:
    """The median of the passes' CPU seconds after the first (`?` where unknown)."""
    cpu = [each[1] for each in runs]
    return "?" if None in (cpu[1:] or cpu) else f"{_later(cpu):.2f}"


def _take(client: TaskClient):
    """The task one ask of `client` is handed, if it is handed one."""
    step = client.step()
    return step.task if step.kind == StepKind.Task else None


def _hand_off(held):
    """One ask of a client that first reports the task it holds, in the same write
    (`held`: the client and its task): the task it is handed next, if any."""
    client, task = held
    step = client.step(finished=[task])
    return step.task if step.kind == StepKind.Task else None


def _hand_offs(clients: Sequence[TaskClient], tasks: int) -> list:
    """Milliseconds per task of rounds in which every one of `clients` (registered, each
    holding a task taken before the clock starts) reports its task finished and takes the next
    in one call, each on a thread of its own, all at once (one client: one GetTask carrying one
    finish, timed on the calling thread); the masters put writes that arrive together in one
    Raft entry."""
    times: list = []
    with concurrent.futures.ThreadPoolExecutor(len(clients)) as pool:
        # One client calls on this thread, as a training loop does: no hand-over to a pool's.
        each = pool.map if len(clients) > 1 else map
        held = list(each(_take, clients))
        while len(times) < tasks:
            holders = [(client, task) for client, task in zip(clients, held) if task is not None]
            if not holders:
                break
            started = time.perf_counter()
            held = list(each(_hand_off, holders))
            clients = [client for client, _task in holders]
            times.extend([(time.perf_counter() - started) * 1000 / len(holders)] * len(holders))
    return sorted(times)


def bench_hand_off(binary: str, directory: Path, tasks: int, together: int) -> None:
    """Milliseconds a task hand-off takes (a task's finish and the next GetTask, in one call
    and one replicated write, p50 and p99): one `TaskClient` alone, and `together`
    registrations of one process handing off at once (per task: a round's time over its
    tasks)."""
    print(f"\nTask hand-off (a finish and the next GetTask in one write, three masters, {tasks} tasks each row)\n")
    print("| clients | p50 ms a task | p99 ms a task |\n| --- | ---: | ---: |")
    for count in (1, together):
        with three_masters(binary, directory / f"hand-off-{count}") as addrs:
            clients = [TaskClient(addrs, name=f"hand-off-{index}") for index in range(count)]
            # Whole rounds: every client of a round is handed a task, one more round taken
            # before the clock starts.
            clients[0].report_index_dataset("hand-off", (max(1, tasks // count) + 1) * count, 1, passes=1)
            for client in clients:
                client.trainer_id  # registered before the clock starts
            times = _hand_offs(clients, tasks)
        p50, p99 = times[len(times) // 2], times[min(len(times) - 1, len(times) * 99 // 100)]
        name = "one TaskClient" if count == 1 else f"{count} TaskClients at once (writes share Raft entries)"
        print(f"| {name} | {p50:.2f} | {p99:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m raftrain.bench", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=64, help="size of the RecordIO file read")
    parser.add_argument("--tasks", type=int, default=1000, help="tasks of the task-queue job")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of task-queue load")
    parser.add_argument("--samples", type=int, default=50_000, help="samples of the PyTorch job")
    parser.add_argument("--shard", type=int, default=1_000, help="samples per task of the PyTorch job")
    # 41: forty pairs after the first, twenty of each order. On the development machine the
    # same loop's step time moves by a third or more from one second to the next (the host), so
    # the median of eight pairs of an order moved a cell by several hundredths from run to run
    # (BENCHMARKS.md).
    parser.add_argument("--passes", type=int, default=41, help="passes of each loader in the PyTorch rows")
    parser.add_argument("--hand-offs", type=int, default=500, help="tasks handed over, per row")
    parser.add_argument("--together", type=int, default=16, help="clients handing tasks over at once (the batched row)")
    args = parser.parse_args()
    binary = os.environ.get("RAFTRAIN_BIN") or shutil.which("raftrain")
    if not binary:
        raise SystemExit("no raftrain binary: set RAFTRAIN_BIN or put raftrain on PATH")
    with tempfile.TemporaryDirectory() as directory:
        bench_reader(binary, Path(directory), args.megabytes)
        bench_tasks(binary, Path(directory), args.tasks, args.seconds)
        bench_hand_off(binary, Path(directory), args.hand_offs, args.together)
        bench_torch(binary, Path(directory), args.samples, args.shard, args.passes)
        bench_ddp(binary, Path(directory), args.samples, args.shard, args.passes)


if __name__ == "__main__":
    main()
