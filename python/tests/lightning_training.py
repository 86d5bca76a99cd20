"""One Lightning training process of the resume test: a linear model trained on a raftrain index
job through `TaskLoader`, checkpointed every `--every` steps by Lightning's `ModelCheckpoint`
(which saves `loader.state_dict()` in each checkpoint). The model counts, in a buffer saved with
its weights, how many times each sample of each pass was trained on, so a checkpoint holds
exactly what the model it saves has seen. Run as a script:

    python lightning_training.py --masters A,B,C --size N --shard S --batch B --passes P
        --checkpoints DIR [--every K] [--stall-at STEP] [--resume PATH] [--out PATH]

`--stall-at` makes the training step that would take the model past that many steps hang
(after writing `DIR/stalled`), for the test to kill the process mid-pass; `--resume` resumes
from a checkpoint (`trainer.fit(..., ckpt_path=...)`); `--out` gets the final counts."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from raftrain.torch import TaskDataset, TaskLoader

JOB = "lightning-resume"
FEATURES = 4
#: How long a stalled step hangs: longer than any test waits for it to be killed.
STALL_S = 600.0


class Indexed:
    """`read(start, end)`: features, labels and the samples' indices."""

    def __init__(self, size: int):
        generator = torch.Generator().manual_seed(0)
        self.features = torch.randn(size, FEATURES, generator=generator)
        self.labels = (self.features.sum(1) > 0).long()

    def __call__(self, start: int, end: int):
        return self.features[start:end], self.labels[start:end], torch.arange(start, end)


class Counting(L.LightningModule):
    """A linear classifier that counts the samples it trains on, per pass (the `seen` buffer:
    saved in every checkpoint with the weights)."""

    def __init__(self, loader: TaskLoader, size: int, passes: int, stall_at: int, stall_marker: Path):
        super().__init__()
        self.loader = loader
        self.stall_at, self.stall_marker = stall_at, stall_marker
        self.net = torch.nn.Linear(FEATURES, 2)
        self.register_buffer("seen", torch.zeros(passes, size, dtype=torch.int64))

    def training_step(self, batch, batch_index):
        features, labels, indices = batch
        if self.global_step == self.stall_at:
            self.stall_marker.write_text(str(self.global_step))
            time.sleep(STALL_S)
        # Lightning's epoch is the loader's pass: on resume both come back from the checkpoint.
        assert self.current_epoch == self.loader.pass_index, (self.current_epoch, self.loader.pass_index)
        self.seen[self.current_epoch, indices] += 1
        return torch.nn.functional.cross_entropy(self.net(features), labels)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--masters", required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--shard", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--passes", type=int, required=True)
    parser.add_argument("--checkpoints", required=True)
    parser.add_argument("--every", type=int, default=7)
    parser.add_argument("--stall-at", type=int, default=-1)
    parser.add_argument("--resume")
    parser.add_argument("--out")
    args = parser.parse_args()
    index = (JOB, args.size, args.shard)
    dataset = TaskDataset(args.masters, index=index, read=Indexed(args.size), passes=args.passes, batch_size=args.batch)
    loader = dataset.loader(num_workers=0)
    model = Counting(loader, args.size, args.passes, args.stall_at, Path(args.checkpoints) / "stalled")
    checkpoints = ModelCheckpoint(args.checkpoints, filename="{step}", every_n_train_steps=args.every, save_top_k=-1)
    trainer = L.Trainer(
        max_epochs=args.passes, accelerator="cpu", logger=False, callbacks=[checkpoints], enable_progress_bar=False
    )
    trainer.fit(model, train_dataloaders=loader, ckpt_path=args.resume)
    if args.out:
        torch.save(model.seen, args.out)


if __name__ == "__main__":
    main()
