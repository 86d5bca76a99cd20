"""`python -m raftrain.bench`: what the Python package costs against the Rust code beside it,
measured in the same run on the same machine (ratios, not absolute figures, on a noisy one).

- RecordIO reading: `Reader` record by record and chunk by chunk, a pure-Python reader of the
  same uncompressed file (zlib's CRC), and `raftrain recordio cat` into /dev/null.
- The task queue: task transitions per second (a GetTask and its TaskFinished count as two) of
  one `TaskClient` against `raftrain bench master` with one Rust client, on three masters.
- `raftrain.torch` (when PyTorch is installed): milliseconds per training step of a small MLP
  fed by `TaskLoader` over an index-range job against the same loop fed by a plain in-memory
  `DataLoader` of the same tensors and batch size.

Needs the `raftrain` binary (`RAFTRAIN_BIN`, or `raftrain` on PATH). Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path

from . import TaskClient, status
from .recordio import Reader, Writer

RECORD_BYTES = 1000
HEADER = struct.Struct("<IIIII")
MAGIC = 0x01020304


def pure_python_records(path: Path):
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


def timed(read) -> float:
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


@contextlib.contextmanager
def three_masters(binary: str, directory: Path):
    """Three `raftrain master` processes on loopback, killed on exit; yields their addresses."""
    addrs = [free_addr() for _ in range(3)]
    peers = ",".join(f"{index + 1}={addr}" for index, addr in enumerate(addrs))
    masters = []
    try:
        for index, addr in enumerate(addrs):
            args = [binary, "master", "--id", str(index + 1), "--listen", addr, "--peers", peers, "--data-dir", str(directory / f"m{index}")]
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


def bench_torch(binary: str, directory: Path, samples: int, shard: int) -> None:
    try:
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        from .torch import TaskDataset
    except ImportError:
        print("\nraftrain.torch: PyTorch is not installed; skipped")
        return
    torch.manual_seed(0)
    torch.set_num_threads(1)
    features, hidden, classes, batch = 256, 256, 10, 100
    rows = torch.randn(samples, features)
    labels = torch.randint(0, classes, (samples,))

    def train(batches) -> float:
        net = torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, classes))
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
        steps, started = 0, time.perf_counter()
        for x, y in batches:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            optimizer.step()
            steps += 1
        return (time.perf_counter() - started) * 1000 / max(steps, 1)

    plain = train(DataLoader(TensorDataset(rows, labels), batch_size=batch))
    with three_masters(binary, directory / "torch") as addrs:
        dataset = TaskDataset(addrs, index=("bench", samples, shard), read=lambda start, end: (rows[start:end], labels[start:end]), batch_size=batch)
        loader = dataset.loader(num_workers=0)
        through_tasks = train(loader)
    print(f"\nraftrain.torch: an MLP {features}-{hidden}-{classes}, {samples} samples in tasks of {shard}, batches of {batch}, one pass, no DataLoader workers\n")
    print("| fed by | ms per step | vs plain |\n| --- | ---: | ---: |")
    print(f"| DataLoader over the in-memory tensors | {plain:.2f} | 1.00 |")
    print(f"| TaskLoader over an index-range job | {through_tasks:.2f} | {through_tasks / plain:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m raftrain.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=64, help="size of the RecordIO file read")
    parser.add_argument("--tasks", type=int, default=1000, help="tasks of the task-queue job")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of task-queue load")
    parser.add_argument("--samples", type=int, default=50_000, help="samples of the PyTorch job")
    parser.add_argument("--shard", type=int, default=1_000, help="samples per task of the PyTorch job")
    args = parser.parse_args()
    binary = os.environ.get("RAFTRAIN_BIN") or shutil.which("raftrain")
    if not binary:
        raise SystemExit("no raftrain binary: set RAFTRAIN_BIN or put raftrain on PATH")
    with tempfile.TemporaryDirectory() as directory:
        bench_reader(binary, Path(directory), args.megabytes)
        bench_tasks(binary, Path(directory), args.tasks, args.seconds)
        bench_torch(binary, Path(directory), args.samples, args.shard)


if __name__ == "__main__":
    main()
