"""One training process of the PyTorch end-to-end test: an MLP trained on a raftrain job through
`TaskDataset`, with DistributedDataParallel over gloo (`loader.ddp(model)`: one pass per
iteration on every rank, a rank out of batches shadowing the others' steps), or alone. Run as a script:

    python torch_training.py --masters A,B,C --records GLOB --rank R --world-size W --out PATH

Rank 0 writes the trained model's state_dict to `--out`; every rank writes a JSON summary of
what its loader reported next to it."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

import raftrain._torch_walk
from raftrain.torch import TaskDataset

from data import blobs

FEATURES = 8
CLASSES = 3
HIDDEN = 32
LEARNING_RATE = 0.1
#: Per process: with W processes DDP averages W batches, so the step is one of W * BATCH.
BATCH = 32
#: Indices per task of an index dataset.
SHARD = 100


def model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(), torch.nn.Linear(HIDDEN, CLASSES))


def meet(directory: Path, rank: int, peers: int) -> None:
    """Waits until `peers` processes (this one included) reached `directory`: processes of one
    job that start together share its tasks, however slowly each one started."""
    directory.mkdir(exist_ok=True)
    (directory / str(rank)).touch()
    while len(list(directory.iterdir())) < peers:
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--masters", required=True)
    parser.add_argument("--records", help="RecordIO files of dense Examples (or --index)")
    parser.add_argument("--index", type=int, help="an index dataset of this many generated blobs")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", required=True)
    parser.add_argument("--peers", type=int, default=1, help="processes (of one job, no DDP) that start together")
    parser.add_argument("--barrier", help="a directory where --peers processes meet before they train")
    parser.add_argument("--pass-end-idle-s", type=float, help="raftrain._torch_walk.PASS_END_IDLE_S for this process")
    parser.add_argument("--step-s", type=float, default=0.0, help="seconds each step sleeps (a slow model)")
    args = parser.parse_args()
    if args.pass_end_idle_s is not None:
        raftrain._torch_walk.PASS_END_IDLE_S = args.pass_end_idle_s
    if args.barrier:
        meet(Path(args.barrier), args.rank, args.peers)
    torch.set_num_threads(1)
    net = model()
    if args.world_size > 1:
        dist.init_process_group(
            "gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=args.world_size
        )
        net = DistributedDataParallel(net)
    common = dict(passes=args.passes, batch_size=BATCH, name=f"rank{args.rank}")
    if args.index:
        rows, targets = (torch.from_numpy(array) for array in blobs(args.index, seed=10))
        dataset = TaskDataset(
            args.masters, index=("e2e", args.index, SHARD), read=lambda start, end: (rows[start:end], targets[start:end]), **common
        )
    else:
        dataset = TaskDataset(args.masters, records=[args.records], job="e2e", **common)
    loader = dataset.loader(num_workers=args.workers)
    optimizer = torch.optim.SGD(net.parameters(), lr=LEARNING_RATE)
    loss_fn = torch.nn.CrossEntropyLoss()
    walked, per_pass = [], []
    # With DDP every iteration is one pass on all ranks together; a rank whose batches ran out
    # shadows the others' steps (Join) and all wait for the pass to end.
    passes = loader.ddp(net) if args.world_size > 1 else loader
    while not passes.job_finished:
        per_pass.append(0)
        for features, labels in passes:
            optimizer.zero_grad()
            loss_fn(net(features), labels.long()).backward()
            optimizer.step()
            time.sleep(args.step_s)
            per_pass[-1] += 1
        walked.append(passes.pass_index)
    plain = net.module if args.world_size > 1 else net
    if args.rank == 0:
        torch.save(plain.state_dict(), args.out)
    summary = {
        "rank": args.rank,
        "batches_per_pass": per_pass,
        "finished": loader.finished,
        "refused": loader.refused,
        "passes_walked": walked,
    }
    with open(f"{args.out}.rank{args.rank}.json", "w") as file:
        json.dump(summary, file)
    if args.world_size > 1:
        # No collective in flight when the group goes (gloo aborts a process whose group goes
        # away with work in flight).
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
