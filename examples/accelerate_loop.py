import os

import torch
from accelerate import Accelerator
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
    dataset = TaskDataset(masters, index=("blobs-accelerate", len(rows.labels), 1000), passes=3,
                          batch_size=64, read=rows)
    loader = dataset.loader(num_workers=2)      # the masters shard the data: not prepared
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.register_for_checkpointing(loader)  # save_state() keeps loader.state_dict()
    while not loader.job_finished:              # one iteration is one pass
        for x, y in loader:
            x, y = x.to(accelerator.device), y.to(accelerator.device)
            optimizer.zero_grad()
            accelerator.backward(torch.nn.functional.cross_entropy(model(x), y))
            optimizer.step()
        accelerator.save_state("checkpoint")    # load_state("checkpoint") resumes from here
    accuracy = (model(rows.features).argmax(1) == rows.labels).float().mean()
    print(f"accuracy {accuracy:.3f}")
