"""The pserver client from Python: init with NumPy arrays, pull them back, push gradients
(SGD on the pservers), a second client of the same job sees the same model, a gradient
computed before a restore is refused, and misuse is a clear exception."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import safetensors.numpy

import raftrain
from cluster import run_tool, wait_until



def test_init_push_pull_round_trip(masters, start_pservers):
    start_pservers(masters.masters, 2)
    client = raftrain.PServerClient(masters.masters)
    rng = np.random.default_rng(7)
    params = {
        "weights": rng.normal(size=(40, 30)).astype(np.float32),
        "bias": np.arange(30, dtype=np.float32),
        "scale": np.float32(2.0).reshape(()),
    }
    client.init(params, "sgd", learning_rate=0.5, block_elements=256)
    pulled = client.pull()
    assert set(pulled) == set(params)
    for name, values in params.items():
        assert pulled[name].dtype == np.float32 and pulled[name].shape == values.shape
        np.testing.assert_array_equal(pulled[name], values)
    grads = {"weights": np.ones((40, 30), dtype=np.float32), "bias": np.full(30, 2.0, dtype=np.float32)}
    client.push(grads)
    after = client.pull()
    np.testing.assert_allclose(after["weights"], params["weights"] - 0.5)
    np.testing.assert_allclose(after["bias"], params["bias"] - 1.0)
    np.testing.assert_array_equal(after["scale"], params["scale"])
    other = raftrain.PServerClient(masters.masters)
    other.init({name: np.zeros_like(values) for name, values in params.items()}, "sgd", learning_rate=0.5, block_elements=256)
    # The first initializer's values won: the second sees the trained model, not its zeros.
    np.testing.assert_allclose(other.pull()["weights"], after["weights"])


def test_misuse_is_refused_clearly(masters, start_pservers):
    start_pservers(masters.masters, 1)
    waiting = raftrain.PServerClient(masters.masters, deadline_s=2)
    with pytest.raises(raftrain.FailedPrecondition, match="serve no model .* init"):
        waiting.pull()  # nobody initialized the pservers within its deadline
    client = raftrain.PServerClient(masters.masters)
    with pytest.raises(raftrain.InvalidArgument, match="optimizer"):
        client.init({"w": np.zeros(3)}, "rmsprop")
    # Refused before any slot is offered the layout: the good init below still lands.
    with pytest.raises(raftrain.InvalidArgument, match="parameter 'n': element 1 is nan"):
        client.init({"n": np.array([0.0, np.nan], np.float32)}, "adam")
    client.init({"w": np.zeros(3)}, "adam", learning_rate=0.1)
    with pytest.raises(raftrain.InvalidArgument, match="not a parameter"):
        client.push({"nope": np.zeros(3)})
    with pytest.raises(raftrain.InvalidArgument, match=r"shape \[4\], the parameter's is \[3\]"):
        client.push({"w": np.zeros(4)})
    with pytest.raises(raftrain.InvalidArgument, match=r"gradient 'w': shape \[3, 1\], the parameter's is \[3\]"):
        client.push({"w": np.zeros((3, 1))})  # the same count of values, another shape
    for bad in (-1, 2**64, 1.5, "one"):
        with pytest.raises(raftrain.InvalidArgument, match="initializer"):
            raftrain.PServerClient(masters.masters, initializer=bad)
    other = raftrain.PServerClient(masters.masters)
    with pytest.raises(raftrain.FailedPrecondition, match="layout"):
        other.init({"w": np.zeros(5)}, "adam", learning_rate=0.1)


def test_a_push_computed_before_a_restore_is_refused(masters, start_pservers):
    """A gradient computed on values pulled before a restore with the model is refused by the
    reloaded pserver (`push` returns False, nothing applied); pulled again, the model is the
    checkpoint's, and a push on it is applied (True)."""
    tasks = raftrain.TaskClient(masters.masters, name="restorer", job="p")
    tasks.report_index_dataset("p", 10, 1, passes=1)
    start_pservers(masters.masters, 1, job="p")
    client = raftrain.PServerClient(masters.masters, job="p")
    client.init({"w": np.full(8, 1.0, dtype=np.float32)}, "sgd", learning_rate=0.5)
    grads = {"w": np.full(8, 0.2, dtype=np.float32)}
    assert client.push(grads) is True
    checkpoint_id = tasks.checkpoint()

    def tagged():
        listed = json.loads(run_tool("job", "list", "--masters", masters.masters, "--json"))
        job = next(job for job in listed["jobs"] if job["name"] == "p")
        return job.get("newest_model_checkpoint") == checkpoint_id

    wait_until(tagged, "the pserver's checkpoint for the progress checkpoint")
    client.pull()
    assert client.push(grads) is True  # 0.8, after the checkpoint (0.9)
    run_tool(
        "job", "restore", "p", "--checkpoint", str(checkpoint_id),
        "--masters", masters.masters, "--wait-secs", "30",
    )
    assert client.push(grads) is False  # computed on the pull before the restore
    np.testing.assert_allclose(client.pull()["w"], np.full(8, 0.9))  # the checkpoint's
    assert client.push(grads) is True
    np.testing.assert_allclose(client.pull()["w"], np.full(8, 0.8))


#: A new process that never saw the layout: attaches, pulls and saves the model.
EXPORT = """
import sys, raftrain
tensors = raftrain.PServerClient(sys.argv[1]).save_safetensors(sys.argv[2])
print(sorted((name, array.shape) for name, array in tensors.items()))
"""


def test_a_client_that_never_initialized_attaches_pulls_and_saves(masters, start_pservers, tmp_path):
    """Evaluating or exporting from a driver or a new process: no `init`, no layout restated;
    the file is a safetensors file the reference reader loads."""
    start_pservers(masters.masters, 2)
    trainer = raftrain.PServerClient(masters.masters)
    params = {"w": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.ones(3, dtype=np.float32)}
    trainer.init(params, "sgd", learning_rate=1.0, block_elements=4)
    trainer.push({"b": np.full(3, 0.5, dtype=np.float32)})
    pulled = raftrain.PServerClient(masters.masters).pull()
    np.testing.assert_array_equal(pulled["w"], params["w"])
    np.testing.assert_array_equal(pulled["b"], np.full(3, 0.5, dtype=np.float32))
    path = tmp_path / "export" / "model.safetensors"
    path.parent.mkdir()
    done = subprocess.run([sys.executable, "-c", EXPORT, masters.masters, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[('b', (3,)), ('w', (3, 4))]"
    loaded = safetensors.numpy.load_file(str(path))
    np.testing.assert_array_equal(loaded["w"], params["w"])
    np.testing.assert_array_equal(loaded["b"], pulled["b"])
    assert [entry.name for entry in path.parent.iterdir()] == ["model.safetensors"], "no temporary file is left"
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask, "saved with the umask's mode, as any file"
    missing = tmp_path / "missing" / "model.safetensors"
    with pytest.raises(FileNotFoundError) as raised:
        raftrain.PServerClient(masters.masters).save_safetensors(missing)
    assert raised.value.filename == str(missing), "named by the path asked for"
