"""A `TaskLoader` iterating while a restore with the model waits for a pserver that cannot
reload (stopped): the loader asks the masters rarely while nothing is handed out, and once the
restore is done it trains on, every sample at least once a pass."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
import torch

import raftrain
import raftrain.task_client
from raftrain.torch import TaskDataset

from cluster import binary, run_tool, wait_until

#: Asks (steps and status reads) a second, at most, while the restore holds the queue. A walk
#: that found nothing free pauses 50 ms, doubling up to 1 s, before the next: about 8 a second
#: on this machine. Without the pause the loop asked hundreds of times a second (1,919 in
#: 5.3 s, a whole core of the masters).
ASKS_PER_S_MAX = 20
#: The restore holds the queue until the stopped pserver's lease runs out (about 5 s here);
#: a shorter wait would not show how often the loader asks meanwhile.
RESTORE_WAIT_S_MIN = 2.0


class _Indices:
    """`read(start, end)`: the indices themselves, to count what the loop trained on."""

    def __call__(self, start: int, end: int):
        return torch.arange(start, end)


class _Asks:
    """Counts this process's `TaskClient` steps and status reads."""

    def __init__(self, monkeypatch):
        self.count = 0
        for name in ("step", "step_ahead", "status"):
            monkeypatch.setattr(raftrain.task_client.TaskClient, name, self._counted(getattr(raftrain.task_client.TaskClient, name)))

    def _counted(self, method):
        def counted(client, *args, **kwargs):
            self.count += 1
            return method(client, *args, **kwargs)

        return counted


def _checkpoint_with_model(masters: str, job: str) -> int:
    """A progress checkpoint of `job`, once its pservers tagged their model checkpoint for it."""
    with raftrain.TaskClient(masters, name="checkpointer", job=job) as client:
        checkpoint_id = client.checkpoint()

    def tagged():
        listed = json.loads(run_tool("job", "list", "--masters", masters, "--json"))
        return next(each for each in listed["jobs"] if each["name"] == job).get("newest_model_checkpoint") == checkpoint_id

    wait_until(tagged, "the pserver's model checkpoint for the progress checkpoint")
    return checkpoint_id


@pytest.mark.timeout(180)
def test_a_loader_waiting_on_a_restore_asks_rarely_and_trains_every_sample(masters, start_pservers, monkeypatch):
    passes, size = 2, 2000
    loader = TaskDataset(masters.masters, index=("p", size, 50), read=_Indices(), batch_size=10, passes=passes).loader()
    loader.job_finished  # the job exists before its pserver starts
    pserver = start_pservers(masters.masters, 1, job="p").processes.children["pserver-0"]
    raftrain.PServerClient(masters.masters, job="p").init({"w": np.zeros(8, dtype=np.float32)}, "sgd", learning_rate=0.5)
    asks = _Asks(monkeypatch)
    consumed, waited = [0], {}

    def restore_while_stopped():
        try:
            while consumed[0] < 60:
                time.sleep(0.01)
            checkpoint_id = _checkpoint_with_model(masters.masters, "p")
            os.kill(pserver.pid, signal.SIGSTOP)
            try:
                started, asked = time.monotonic(), asks.count
                args = [binary(), "job", "restore", "p", "--checkpoint", str(checkpoint_id), "--masters", masters.masters]
                waited["restore"] = subprocess.run(args, capture_output=True, text=True, timeout=120)
                waited["seconds"], waited["asks"] = time.monotonic() - started, asks.count - asked
            finally:
                os.kill(pserver.pid, signal.SIGCONT)
        except BaseException as error:  # the test thread raises it
            waited["error"] = error

    restorer = threading.Thread(target=restore_while_stopped, daemon=True)
    restorer.start()
    seen: collections.Counter = collections.Counter()
    while not loader.job_finished:
        for batch in loader:
            seen.update(batch.tolist())
            consumed[0] += 1
            time.sleep(0.005)
    restorer.join(timeout=120)
    if "error" in waited:
        raise waited["error"]
    assert "restore" in waited, "the restore did not end within the test"
    restore = waited["restore"]
    assert restore.returncode == 0, restore.stdout + restore.stderr
    assert "reload" in restore.stdout, "the restore waited for the pserver to reload"
    assert waited["seconds"] >= RESTORE_WAIT_S_MIN, f"the restore held the queue only {waited['seconds']:.1f} s"
    assert waited["asks"] <= ASKS_PER_S_MAX * waited["seconds"], waited
    assert min(seen[index] for index in range(size)) >= passes, "a sample was missed in a pass"
    status = masters.status()
    assert status["job_finished"] and status["failed"] == 0
