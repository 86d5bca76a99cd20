"""A plain elastic DDP training script, as a user writes it for torchrun: nothing in it knows
about raftrain. It trains a small model on the CPU (gloo) for `--steps` steps, resumes from its
own checkpoint (rank 0 writes one after every step), and logs one line per step with the world
size and torchrun's restart count, which the torchrun tests read."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--step-s", type=float, default=0.2)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    checkpoint = args.dir / "checkpoint.pt"
    step = 0
    if checkpoint.exists():
        saved = torch.load(checkpoint)
        model.module.load_state_dict(saved["model"])
        step = saved["step"]
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    log = args.dir / f"steps-{os.environ.get('RAFTRAIN_TEST_NODE', 'node')}.jsonl"
    while step < args.steps:
        inputs = torch.randn(16, 8)
        loss = model(inputs).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if rank == 0:
            temporary = checkpoint.with_suffix(f".{os.getpid()}.tmp")
            torch.save({"model": model.module.state_dict(), "step": step}, temporary)
            os.replace(temporary, checkpoint)
        with open(log, "a") as lines:
            lines.write(json.dumps({"step": step, "world": world, "rank": rank, "restart": restart, "pid": os.getpid()}) + "\n")
        time.sleep(args.step_s)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
