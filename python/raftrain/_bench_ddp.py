"""`python -m raftrain.bench`'s DDP rows: two DistributedDataParallel ranks (gloo, spawned
processes, no DataLoader workers) train an MLP over the same in-memory samples through
`TaskLoader.ddp(model)` and through a `DataLoader` of the same batches whose tasks are dealt to
the ranks in turn, under `Join` (the baseline a DDP user writes for uneven data), alternating
passes, beside the same three masters. With tasks of twice the shard the task count is odd, so
the ranks run out of tasks apart: the rank out of tasks shadows the other's last steps, and
neither loader should wait longer than that."""

from __future__ import annotations

import time
from pathlib import Path
from typing import List

#: The ranks of each row.
WORLD_SIZE = 2
#: Rows in a batch of each rank.
BATCH = 512


def bench_ddp(binary: str, directory: Path, samples: int, shard: int, passes: int) -> None:
    try:
        import torch.multiprocessing
    except ImportError:
        print("\nraftrain.torch with DDP: PyTorch is not installed; skipped")
        return
    from .bench import _later, free_addr, three_masters

    print(f"\nraftrain.torch with DDP: {WORLD_SIZE} ranks (gloo, no workers), batch {BATCH} a rank, {samples} samples in tasks of the")
    print(f"size shown, {passes} passes of each loader, alternating, beside the same three masters; seconds a pass on rank 0,")
    print("the median of passes 2 on (the DataLoader deals the tasks to the ranks in turn, under Join); vs DataLoader: the")
    print("median of passes 2 on of each DataLoader pass's seconds over the TaskLoader pass's after it\n")
    print("| ranks | task | tasks | DataLoader with Join, s | TaskLoader.ddp, s | vs DataLoader |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    context = torch.multiprocessing.get_context("spawn")
    for number, task_size in enumerate((shard, 2 * shard)):
        with three_masters(binary, directory / f"ddp-{number}") as addrs:
            results = context.SimpleQueue()
            port = int(free_addr().rsplit(":", 1)[1])
            arguments = (port, ",".join(addrs), f"ddp{number}", samples, task_size, passes, results)
            ranks = [context.Process(target=_rank, args=(rank, *arguments)) for rank in range(WORLD_SIZE)]
            for process in ranks:
                process.start()
            plain, through_tasks = _collect(results, ranks)
        later = [_later(runs) for runs in (plain, through_tasks)]
        ratio = _later([baseline / tasks for baseline, tasks in zip(plain, through_tasks)])
        tasks = -(-samples // task_size)
        print(f"| {WORLD_SIZE} | {task_size} | {tasks} | {later[0]:.2f} | {later[1]:.2f} | {ratio:.2f}x |", flush=True)


def _collect(results, ranks) -> tuple:
    """Rank 0's result, once every rank exited; a rank that failed raises."""
    while results.empty() and all(process.is_alive() for process in ranks):
        time.sleep(0.1)
    for process in ranks:
        process.join()
    failed = [number for number, process in enumerate(ranks) if process.exitcode != 0]
    if failed or results.empty():
        raise RuntimeError(f"DDP benchmark ranks {failed} failed (exit codes {[process.exitcode for process in ranks]})")
    return results.get()


def _rank(rank: int, port: int, masters: str, job: str, samples: int, task_size: int, passes: int, results) -> None:
    """One rank: `passes` of each loader, alternating; rank 0 puts the seconds of each in
    `results`."""
    import torch
    import torch.distributed as dist

    from .bench import MLP_WIDTHS, _Rows, mlp, task_batches
    from .torch import TaskDataset

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD_SIZE)
    try:
        generator = torch.Generator().manual_seed(0)
        features, _hidden, classes = MLP_WIDTHS
        rows = torch.randn(samples, features, generator=generator)
        labels = torch.randint(0, classes, (samples,), generator=generator)
        net = torch.nn.parallel.DistributedDataParallel(mlp())
        optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
        dataset = TaskDataset(masters, index=(job, samples, task_size), read=_Rows(rows, labels), batch_size=BATCH, passes=passes)
        passes_of_tasks = dataset.loader().ddp(net)
        passes_of_tasks.job_finished  # the job is submitted before the clock starts
        plain: List[float] = []
        through_tasks: List[float] = []
        for _ in range(passes):
            dealt = task_batches(rows, labels, task_size, BATCH, rank, WORLD_SIZE)
            plain.append(_pass(net, optimizer, dealt, joined=True))
            through_tasks.append(_pass(net, optimizer, passes_of_tasks, joined=False))
        if rank == 0:
            results.put((plain, through_tasks))
        # Both ranks' collectives are over before either tears the group down: gloo aborts a
        # process (std::terminate) whose group goes away with work in flight.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _pass(net, optimizer, batches, joined: bool) -> float:
    """Seconds for one pass over `batches`, from a barrier of the ranks to this rank's end
    (`joined`: under `Join`, which `TaskLoader.ddp` does itself)."""
    import contextlib

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.join import Join

    dist.barrier()
    started = time.perf_counter()
    with Join([net]) if joined else contextlib.nullcontext():
        for x, y in batches:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(net(x), y).backward()
            optimizer.step()
    return time.perf_counter() - started
