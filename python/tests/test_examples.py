"""The README's PyTorch, Lightning and accelerate examples are `examples/torch_loop.py`,
`lightning_loop.py` and `accelerate_loop.py`, printed in the README exactly as the files are
(`test_lightning.py` runs the other two), and `torch_loop.py` trains to the end under each
multiprocessing start method (fork, spawn, forkserver: Python 3.14 makes forkserver Linux's
default) against three real masters, from
the `train.pt` that `examples/make_train_pt.py` writes. The `records=` variant yields class
ids that `cross_entropy` takes, and refuses labels that are not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import raftrain
from raftrain.torch import TaskDataset

from data import write_blobs

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: Runs a script as `python SCRIPT` would, under the start method given first.
UNDER_START_METHOD = (
    "import multiprocessing, runpy, sys; multiprocessing.set_start_method(sys.argv[1]); "
    "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


@pytest.mark.parametrize("example", ["torch_loop.py", "lightning_loop.py", "accelerate_loop.py"])
def test_the_readme_prints_the_example_as_the_file_is(example):
    readme = (ROOT / "README.md").read_text()
    loop = (EXAMPLES / example).read_text()
    assert f"```python\n{loop}```" in readme, f"README.md's example differs from examples/{example}"
    assert "python examples/make_train_pt.py" in readme


@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_the_readme_example_trains_under_each_start_method(masters, tmp_path, start_method):
    subprocess.run(
        [sys.executable, str(EXAMPLES / "make_train_pt.py"), "--examples", "3000"], cwd=tmp_path, check=True
    )
    environment = dict(os.environ, RAFTRAIN_MASTERS=masters.masters)
    command = [sys.executable, "-c", UNDER_START_METHOD, start_method, str(EXAMPLES / "torch_loop.py")]
    run = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"
    accuracy = float(run.stdout.split("accuracy ")[-1])
    status = masters.status()
    assert status["job_finished"] and status["failed"] == 0, status
    assert accuracy > 0.9, run.stdout


def test_records_yield_class_ids_and_refuse_real_valued_labels(masters, tmp_path):
    write_blobs(tmp_path / "train.recordio", 200, seed=3, max_chunk_bytes=4000)
    dataset = TaskDataset(masters.masters, records=[str(tmp_path / "train.recordio")], job="classes", batch_size=50)
    net = torch.nn.Linear(8, 3)
    for features, labels in dataset.loader(num_workers=0):
        assert labels.dtype == torch.int64
        torch.nn.functional.cross_entropy(net(features), labels).backward()
    path = tmp_path / "values.recordio"
    with raftrain.recordio.Writer(path) as writer:
        for value in (0.5, 1.0):
            writer.write(raftrain.Example(dense=np.zeros(2, np.float32), label=value).encode())
    regression = TaskDataset(masters.masters, records=[str(path)], job="values")
    with pytest.raises(raftrain.DataError, match="label 0.5 .*label_dtype=torch.float32"):
        list(regression.loader(num_workers=0))
    floats = TaskDataset(masters.masters, records=[str(path)], job="floats", label_dtype=torch.float32)
    labels = torch.cat([labels for _, labels in floats.loader(num_workers=0)])
    assert labels.dtype == torch.float32 and sorted(labels.tolist()) == [0.5, 1.0]
