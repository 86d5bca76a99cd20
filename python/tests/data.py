"""Datasets the tests write: Gaussian blobs as `Example` records in RecordIO, and the same
blobs as arrays (for index-range jobs and the plain PyTorch baseline)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

import numpy as np

import raftrain
from raftrain.recordio import Writer

FEATURES = 8
CLASSES = 3


def blobs(count: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """`count` points in `CLASSES` separable Gaussian clusters of `FEATURES` dimensions."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(1234).normal(0.0, 2.0, size=(CLASSES, FEATURES))
    labels = rng.integers(0, CLASSES, size=count)
    points = centres[labels] + rng.normal(0.0, 1.0, size=(count, FEATURES))
    return points.astype(np.float32), labels.astype(np.float32)


def write_blobs(path: Path, count: int, seed: int, *, max_chunk_bytes: int, compressor: str = "none") -> List[raftrain.Example]:
    """Writes blobs as Examples into `path`; the Examples written."""
    points, labels = blobs(count, seed)
    examples = [raftrain.Example(dense=point, label=label) for point, label in zip(points, labels)]
    with Writer(path, compressor, max_chunk_bytes=max_chunk_bytes) as writer:
        for example in examples:
            writer.write(example.encode())
    return examples
