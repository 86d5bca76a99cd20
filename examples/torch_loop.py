import os
import sys

import torch
from raftrain.torch import TaskDataset


class Rows:
    """Reads a range of rows; a class at module level, so spawned DataLoader workers get it."""

    def __init__(self, path):
        self.features, self.labels = torch.load(path)  # [n, 10] float32, [n] int64

    def __call__(self, start, end):
        return self.features[start:end], self.labels[start:end]


if __name__ == "__main__":
    masters = os.environ.get("RAFTRAIN_MASTERS", "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003")
    rows = Rows("train.pt")
    dataset = TaskDataset(masters, index=("blobs", len(rows.labels), 1000), passes=3,
                          batch_size=64, read=rows,
                          restart="--restart" in sys.argv)  # train "blobs" again once it ended
    loader = dataset.loader(num_workers=2)      # a DataLoader; batching is the dataset's
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    while not loader.job_finished:              # one iteration is one pass
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    accuracy = (model(rows.features).argmax(1) == rows.labels).float().mean()
    print(f"accuracy {accuracy:.3f}")
