"""`TaskLoader` as the train dataloader of Lightning and accelerate: the README's two examples
(`examples/lightning_loop.py`, `examples/accelerate_loop.py`) train to the end against three real
masters, and a Lightning run killed (SIGKILL) mid-pass and resumed from its last checkpoint
trains every sample the checkpoint had not, once, and nothing it had, again, except the task
that was part-way through at the checkpoint (trained again whole)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator
from lightning.fabric.utilities.data import has_len
from lightning.fabric.utilities.types import _Stateful

from raftrain.torch import TaskDataset

from cluster import wait_until

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parents[1] / "examples"

#: The resume test's job: 12 tasks of 5 batches a pass, 60 steps a pass, for 2 passes.
SIZE, SHARD, BATCH, PASSES = 600, 50, 10, 2
#: Checkpoints every 7 steps (never on a task boundary but every 5th), the last before the kill
#: at step 63: 3 batches into pass 1's first task.
EVERY, STALL_AT = 7, 66


def _env(**extra: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    return env


def test_the_loader_is_what_lightning_and_accelerate_look_for(masters):
    """Lightning finds the loader stateful (it saves `state_dict()` in its checkpoints) and of
    no length (it iterates each pass to its end); accelerate's `prepare` returns it untouched
    (the masters shard the data, not accelerate); `set_epoch` records the epoch, and
    `loader.client` is the loader's own client of the job."""
    read = lambda start, end: torch.arange(start, end)  # noqa: E731
    loader = TaskDataset(masters.masters, index=("protocol", 40, 10), read=read, batch_size=4).loader()
    # 4 tasks of 10 indices, 3 batches each: batches never span tasks.
    assert isinstance(loader, _Stateful) and not has_len(loader) and loader.batches_per_pass == 4 * 3
    model = torch.nn.Linear(1, 1)
    prepared_model, prepared_loader = Accelerator(cpu=True).prepare(model, loader)
    assert prepared_loader is loader
    loader.set_epoch(3)
    assert loader.epoch == 3
    assert loader.client is loader.client and loader.client.job == "protocol"
    assert sorted(torch.cat(list(loader)).tolist()) == list(range(40)) and loader.client.status()["job_finished"]


@pytest.mark.parametrize("example", ["lightning_loop.py", "accelerate_loop.py"])
def test_the_readme_example_trains_to_the_end(masters, tmp_path, example):
    """The example trains its three passes, the job finishes with no failed task, and the
    checkpoint it saves (Lightning's or accelerate's) holds the loader's state."""
    subprocess.run(
        [sys.executable, str(EXAMPLES / "make_train_pt.py"), "--examples", "3000"], cwd=tmp_path, check=True
    )
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / example)],
        cwd=tmp_path, env=_env(RAFTRAIN_MASTERS=masters.masters), capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, f"exit {run.returncode}\n{run.stdout}\n{run.stderr}"
    status = masters.status()
    # 3000 examples, 1000 a task.
    assert status["job_finished"] and status["failed"] == 0 and status["done"] == 3, status
    assert float(run.stdout.split("accuracy ")[-1]) > 0.9, run.stdout
    if example == "lightning_loop.py":
        (saved,) = (tmp_path / "checkpoints").glob("*.ckpt")
        loader_states = torch.load(saved, weights_only=False)["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    else:
        loader_states = [torch.load(tmp_path / "checkpoint" / "custom_checkpoint_0.pkl", weights_only=False)]
    assert [state["job"] for state in loader_states] == [f"blobs-{example.split('_')[0]}"], loader_states


def test_a_lightning_run_resumed_after_a_kill_trains_each_remaining_sample_once(masters, tmp_path):
    """A Lightning run checkpointing every 7 steps is killed (SIGKILL) at step 66, in pass 1
    (of 0 and 1), after its last checkpoint (step 63) and after it reported pass 1's first task
    finished (trained on from step 60 to 64); a new process resumes from that checkpoint
    (`trainer.fit(..., ckpt_path=...)`, which calls `loader.load_state_dict`) and ends the job.
    The model counts each sample trained per pass, in a buffer its checkpoints save, so the
    final counts are what the resumed model's whole history trained. Asserted, per pass and
    task: a task the checkpoint's model had trained whole is not trained again (its samples
    once); every other task is trained once more whole after the checkpoint; so each sample
    is trained once, except the one task that was part-way through at the checkpoint, whose
    samples trained before it are trained twice (the masters record tasks, not batches, done).
    Nothing the killed process did after the checkpoint counts: its model is lost, and the task
    it reported finished after the checkpoint is handed out again."""
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    script = [
        sys.executable, str(HERE / "lightning_training.py"), "--masters", masters.masters, "--size", str(SIZE),
        "--shard", str(SHARD), "--batch", str(BATCH), "--passes", str(PASSES), "--checkpoints", str(checkpoints),
        "--every", str(EVERY),
    ]
    victim = subprocess.Popen([*script, "--stall-at", str(STALL_AT)], env=_env(), cwd=tmp_path)
    try:
        stalled = checkpoints / "stalled"
        wait_until(lambda: _running(victim) and stalled.exists(), "the run to reach its stall", timeout_s=240)
        wait_until(lambda: masters.status()["done"] == 1, "pass 1's first task reported")
    finally:
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    killed = masters.status()
    assert killed["pass"] == 1 and not killed["job_finished"], killed
    last = max(checkpoints.glob("step=*.ckpt"), key=lambda path: int(path.stem.split("=")[1]))
    assert last.stem == "step=63", sorted(path.name for path in checkpoints.glob("*.ckpt"))
    out = tmp_path / "seen.pt"
    resumed = subprocess.run([*script, "--resume", str(last), "--out", str(out)], env=_env(), cwd=tmp_path, timeout=240)
    assert resumed.returncode == 0
    status = masters.status()
    assert status["job_finished"] and status["failed"] == 0 and status["done"] == SIZE // SHARD, status
    at_checkpoint = torch.load(last, weights_only=False)["state_dict"]["seen"]
    final = torch.load(out)
    assert at_checkpoint.tolist()[0] == [1] * SIZE, "pass 0 was trained once before the checkpoint"
    part_way = []
    for pass_index in range(PASSES):
        for start in range(0, SIZE, SHARD):
            before, after = at_checkpoint[pass_index, start : start + SHARD], final[pass_index, start : start + SHARD]
            if bool((before == 1).all()):
                assert torch.equal(after, before), f"pass {pass_index}, task at {start}: done, yet trained again"
                continue
            assert torch.equal(after, before + 1), f"pass {pass_index}, task at {start}: {after.tolist()}"
            if bool(before.any()):
                part_way.append((pass_index, start))
    # Pass 1's first task (whichever the masters handed out first), 3 of its 5 batches.
    assert [pass_index for pass_index, _ in part_way] == [1] and int(at_checkpoint[1].sum()) == 3 * BATCH, part_way
    assert int((final == 1).sum()) == PASSES * SIZE - 3 * BATCH and int((final == 2).sum()) == 3 * BATCH


def _running(process: subprocess.Popen) -> bool:
    """True while `process` runs; fails the test at once if it exited."""
    code = process.poll()
    assert code is None, f"the training process exited early with {code}"
    return True
