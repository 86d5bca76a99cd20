"""Writes `train.pt` for `torch_loop.py`: Gaussian blobs, 10 features and 3 classes, as
`(features float32 [n, 10], labels int64 [n])`; the same file for the same seed everywhere.

    python examples/make_train_pt.py [PATH] [--examples N] [--seed S]
"""

import argparse

import torch


def blobs(examples: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(3, 10, generator=generator) * 2.0
    labels = torch.randint(0, 3, (examples,), generator=generator)
    features = centres[labels] + torch.randn(examples, 10, generator=generator)
    return features, labels


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("path", nargs="?", default="train.pt")
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args()
    torch.save(blobs(arguments.examples, arguments.seed), arguments.path)
    print(f"wrote {arguments.examples} examples to {arguments.path}")
