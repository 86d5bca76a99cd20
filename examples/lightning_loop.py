import os
import sys

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from raftrain.torch import TaskDataset


class Rows:
    """Reads a range of rows; a class at module level, so spawned DataLoader workers get it."""

    def __init__(self, path):
        self.features, self.labels = torch.load(path)  # [n, 10] float32, [n] int64

    def __call__(self, start, end):
        return self.features[start:end], self.labels[start:end]


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))

    def training_step(self, batch, batch_index):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


if __name__ == "__main__":
    masters = os.environ.get("RAFTRAIN_MASTERS", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")
    rows = Rows("train.pt")
    dataset = TaskDataset(masters, index=("blobs-lightning", len(rows.labels), 1000), passes=3,
                          batch_size=64, read=rows)
    loader = dataset.loader(num_workers=2)      # one Lightning epoch is one pass of the job
    checkpoints = ModelCheckpoint("checkpoints", every_n_train_steps=100)
    trainer = L.Trainer(max_epochs=3, accelerator="cpu", logger=False, callbacks=[checkpoints],
                        enable_progress_bar=False)
    # Saving a checkpoint saves loader.state_dict() in it; resuming from one (the path as the
    # first argument) puts the job's data back where it was.
    model = Classifier()
    trainer.fit(model, train_dataloaders=loader, ckpt_path=sys.argv[1] if len(sys.argv) > 1 else None)
    accuracy = (model.net(rows.features).argmax(1) == rows.labels).float().mean()
    print(f"accuracy {accuracy:.3f}")
