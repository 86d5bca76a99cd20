"""`raftrain.torch` with PyTorch: a task is reported finished exactly when the training loop
has consumed its last batch, with DataLoader workers prefetching; a training process killed
mid-task leaves its tasks to be handed out again; and two DDP processes train an MLP through
`TaskDataset` while the master leader is killed mid-pass, finishing every task of every pass
once, to the accuracy of one plain PyTorch process."""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch  # the test environment installs it: a missing torch fails, never skips

import raftrain
import raftrain._torch_walk
from raftrain.torch import REGISTRATIONS_PER_WORKER, TaskDataset

from cluster import free_addr, run_tool, wait_until
from data import blobs, write_blobs

HERE = Path(__file__).resolve().parent


def test_importing_raftrain_does_not_import_torch():
    """`import raftrain` needs NumPy only."""
    code = "import sys, raftrain; assert 'torch' not in sys.modules, 'torch was imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=HERE)


def test_a_task_is_reported_only_after_its_last_batch_is_consumed(masters, tmp_path):
    """Two workers prefetching two batches each: while the loop trains on its k-th batch
    (one task each here), at most k - 1 tasks are done, whatever the workers read ahead (the
    reports are sent off the training thread, so fewer may have arrived yet), and every task
    is done once the pass's iteration ends."""
    write_blobs(tmp_path / "train.recordio", 400, seed=8, max_chunk_bytes=1000)
    dataset = TaskDataset(masters.masters, records=[str(tmp_path / "train.recordio")], passes=1, batch_size=1000)
    loader = dataset.loader(num_workers=2, prefetch_factor=2)
    consumed = 0
    records = 0
    for features, labels in loader:
        assert masters.status()["done"] <= consumed, "a task was reported before it was consumed"
        consumed += 1
        records += len(labels)
        time.sleep(0.05)  # let the workers run ahead
    status = masters.status()
    assert records == 400 and status["job_finished"] and status["done"] == consumed == loader.finished


def test_a_slow_training_loop_keeps_its_tasks_through_progress_reports(start_masters):
    """A training step far slower than the task timeout (2 s a task against 1 s): the loop's
    progress reports move each task's deadline on, so no task is taken back, each is handed
    out and finished once, and the job finishes with none failed."""
    group = start_masters(extra_args=["--task-timeout-min-ms", "1000"])
    read = lambda start, end: torch.arange(start, end)
    dataset = TaskDataset(group.masters, index=("slow", 12, 4), read=read, passes=1, batch_size=1)
    loader = dataset.loader(num_workers=0)
    seen = []
    for batch in loader:
        seen.extend(batch.tolist())
        time.sleep(0.5)  # a slow step: 4 batches a task
    status = group.status()
    assert sorted(seen) == list(range(12))
    assert (loader.finished, loader.refused) == (3, 0)
    assert loader.progressed >= 3, "each task reported its progress"
    assert status["job_finished"] and status["failed"] == 0
    assert status["dispatched"] == 3, "no task was taken back and handed out again"


class _Arange:
    """`read(start, end)`: the indices themselves (a class, so workers of any start method get it)."""

    def __call__(self, start: int, end: int):
        return torch.arange(start, end)


def test_a_slow_loop_keeps_the_tasks_its_workers_took_ahead(start_masters):
    """With DataLoader workers, a worker takes its next task as soon as it yielded its last
    task's last batch, and that task's batches then wait in the DataLoader's queue behind the
    batches of both workers before the loop: about 4 steps of 0.6 s here, longer than the 2 s
    task timeout. The training process reports the progress of its workers' tasks waiting there
    too, so a slow loop loses none of them to the timeout (each is handed out once)."""
    group = start_masters(extra_args=["--task-timeout-min-ms", "2000"])
    dataset = TaskDataset(group.masters, index=("slow-workers", 24, 6), read=_Arange(), passes=1, batch_size=1)
    loader = dataset.loader(num_workers=2)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a finish refused (a task taken back) warns
        for batch in loader:
            seen.extend(batch.tolist())
            time.sleep(0.6)  # a slow step
    status = group.status()
    assert sorted(seen) == list(range(24)), "each sample once"
    assert (loader.finished, loader.refused) == (4, 0)
    assert status["job_finished"] and status["failed"] == 0
    assert status["dispatched"] == 4, "no task was taken back and handed out again"


class _CorruptAt:
    """`read(start, end)` that fails for the range starting at `bad`, as a corrupt file would."""

    def __init__(self, bad: int):
        self.bad = bad

    def __call__(self, start: int, end: int):
        if start == self.bad:
            raise ValueError(f"rows {start}-{end}: corrupt")
        return torch.arange(start, end)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_task_whose_data_fails_is_failed_and_ends_the_job_naming_it(masters, workers):
    """A `read` that raises fails its task (spending its failure budget) as the error reaches the
    loop; iterated again, the loader gets the task again until the budget is spent, and the job
    then ends with it failed: `job_finished` raises `TasksFailed` naming it, where the task was
    handed to the process again for ever, the job never finishing."""
    dataset = TaskDataset(masters.masters, index=(f"corrupt-{workers}", 12, 4), read=_CorruptAt(4), passes=1, batch_size=4, policy={"max_task_failures": 2})
    loader = dataset.loader(num_workers=workers)
    raised = 0
    with pytest.raises(raftrain.TasksFailed, match="rows 4-8: corrupt"):
        while not loader.job_finished:
            try:
                for _batch in loader:
                    pass
            except ValueError as error:
                assert "rows 4-8: corrupt" in str(error)
                raised += 1
                assert raised <= 12, "the task keeps coming back"
    status = raftrain.status(masters.masters, job=f"corrupt-{workers}")
    assert status["failed"] == 1 and status["done"] == 2, status
    # Each raise reached the loop (a DataLoader worker's failures may count in one raise).
    assert raised >= 1, raised


class _WrongRowsAt:
    """`read(start, end)`: a dict batch of the range's rows, or a list of its samples; at
    `bad` a batch with a row missing from one element (`"short"`), or `None`."""

    def __init__(self, bad: int, wrong: str):
        self.bad, self.wrong = bad, wrong

    def __call__(self, start: int, end: int):
        if start == self.bad:
            return None if self.wrong == "none" else {"x": torch.arange(start, end), "y": torch.arange(start, end - 1)}
        if start == 0:
            return [(index, index % 3) for index in range(start, end)]
        return {"x": torch.arange(start, end), "y": torch.arange(start, end)}


@pytest.mark.parametrize("workers, wrong", [(0, "short"), (2, "none")])
def test_a_batch_whose_rows_are_not_its_indices_fails_its_task_naming_the_read(masters, workers, wrong):
    """A `read` whose batch holds fewer rows than its range (or nothing) would train some
    samples never while the task counts done: it fails the task naming the call, the task and
    the rows, and the job ends with it failed. Batches of the right rows (a dict of tensors, a
    list of samples) pass as they are."""
    job = f"wrong-rows-{workers}"
    dataset = TaskDataset(masters.masters, index=(job, 12, 4), read=_WrongRowsAt(4, wrong), passes=1, batch_size=4, policy={"max_task_failures": 1})
    loader = dataset.loader(num_workers=workers)
    said = r"task 1: read\(4, 8\) returned a dict of 2 elements for 4 indices, whose element 'y' has 3 rows" if wrong == "short" else r"task 1: read\(4, 8\) returned None"
    good = []
    with pytest.raises(raftrain.TasksFailed, match=said):
        while not loader.job_finished:
            try:
                good.extend(loader)
            except raftrain.DataError as error:
                assert re.search(said, str(error)), error
    assert sorted(type(batch).__name__ for batch in good) == ["dict", "list"]
    status = raftrain.status(masters.masters, job=job)
    assert status["failed"] == 1 and status["done"] == 2, status


def test_a_killed_process_leaves_its_tasks_to_be_handed_out_again(masters, tmp_path):
    """A training process killed (SIGKILL) in the middle of the job: its tasks, read but not
    reported, come back once its workers' leases end, and a new process finishes the job,
    every task reported once."""
    write_blobs(tmp_path / "train.recordio", 900, seed=9, max_chunk_bytes=1000)
    records = str(tmp_path / "train.recordio")
    out = tmp_path / "killed.pt"
    script = [sys.executable, str(HERE / "torch_training.py"), "--masters", masters.masters, "--records", records, "--passes", "1", "--workers", "2", "--out", str(out)]
    # Slow steps, so the victim cannot finish the job between the check and the kill.
    victim = subprocess.Popen([*script, "--step-s", "0.2"], env=_env(), cwd=HERE)
    wait_until(lambda: _running(victim) and masters.status()["done"] >= 3, "the first process to finish some tasks", timeout_s=120)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    held = masters.status()
    assert not held["job_finished"]
    survivor = subprocess.run(script, env=_env(), cwd=HERE, timeout=300)
    assert survivor.returncode == 0
    status = masters.status()
    assert status["job_finished"] and status["failed"] == 0
    summary = json.loads(Path(f"{out}.rank0.json").read_text())
    assert summary["finished"] == status["done"] - held["done"], summary
    assert status["dispatched"] > status["done"], "the killed process's tasks were handed out again"


def test_two_ddp_processes_train_through_a_leader_kill_to_the_baseline_accuracy(masters, tmp_path):
    """Two DDP processes (gloo) with a DataLoader worker each train an MLP for three passes
    over a generated index-range dataset while the leader is killed and restarted mid-pass;
    every task of every pass is finished once and the model is as accurate (within 0.02) as
    the same model trained by one plain PyTorch process on the same data."""
    out = tmp_path / "model.pt"
    port = free_addr().split(":")[1]
    ranks = [
        _training(masters, rank, out, "--index", "3000", "--world-size", "2", "--port", port) for rank in range(2)
    ]
    try:
        wait_until(lambda: all(map(_running, ranks)) and masters.status()["pass"] >= 1, "the second pass to start", timeout_s=300)
        leader = masters.leader_index()
        masters.kill(leader)
        time.sleep(1.0)
        masters.spawn(leader)
    except BaseException:
        for process in ranks:
            process.kill()
        raise
    _all_succeed(ranks)
    status = masters.status()
    tasks_per_pass = status["done"]
    summaries = [json.loads(Path(f"{out}.rank{rank}.json").read_text()) for rank in range(2)]
    assert status["job_finished"] and status["failed"] == 0 and status["passes"] == 3
    assert status["dataset_kind"] == "index_range" and tasks_per_pass == 30
    assert sum(summary["finished"] for summary in summaries) == 3 * tasks_per_pass, summaries
    assert sum(summary["refused"] for summary in summaries) == 0, summaries
    assert [summary["passes_walked"] for summary in summaries] == [[0, 1, 2]] * 2, "one iteration, one pass, together"
    assert status["dispatched"] == 3 * tasks_per_pass, "no task was handed out twice"
    sys.path.insert(0, str(HERE))
    from torch_training import model as make_model

    trained = make_model()
    trained.load_state_dict(torch.load(out))
    baseline = _plain_pytorch(make_model())
    accuracy, baseline_accuracy = _accuracy(trained), _accuracy(baseline)
    assert abs(accuracy - baseline_accuracy) <= 0.02, (accuracy, baseline_accuracy)
    assert baseline_accuracy > 0.9


@pytest.mark.timeout(240)
def test_ddp_ranks_whose_tasks_end_unevenly_do_not_wait_for_each_other(masters, tmp_path):
    """Two DDP processes without DataLoader workers, 29 tasks a pass: the ranks step together,
    so one runs out of tasks while the other still trains the pass's last. Its walk ends as
    soon as the masters answer that nothing is free, and it shadows the other's steps: were it
    to wait there for the pass to end (for `PASS_END_IDLE_S`, set past this test's timeout),
    the other's next step would wait for it, and the last task would time out and be trained
    twice. Every task of each pass is handed out once, and each iteration is one pass. The
    ranks share the tasks evenly: each asks ahead for no more than its share of a pass (15 of
    29), where asks of up to eight at once could leave one rank several tasks more than the
    other, which the other then shadowed step by step."""
    out = tmp_path / "model.pt"
    port = free_addr().split(":")[1]
    arguments = ("--index", "2900", "--world-size", "2", "--port", port, "--workers", "0", "--pass-end-idle-s", "3600")
    _all_succeed([_training(masters, rank, out, *arguments) for rank in range(2)])
    status = masters.status()
    summaries = [json.loads(Path(f"{out}.rank{rank}.json").read_text()) for rank in range(2)]
    assert status["job_finished"] and status["failed"] == 0 and status["done"] == 29
    assert status["dispatched"] == 3 * 29, "no task was handed out twice"
    assert sum(summary["finished"] for summary in summaries) == 3 * 29, summaries
    assert sum(summary["refused"] for summary in summaries) == 0, summaries
    assert [summary["passes_walked"] for summary in summaries] == [[0, 1, 2]] * 2
    # 15 and 14 tasks of four batches a pass; past its share a rank still takes what is free,
    # one task at a time, where the other's asks ahead are slow to be answered.
    for batches in zip(*(summary["batches_per_pass"] for summary in summaries)):
        assert abs(batches[0] - batches[1]) <= 2 * 4, summaries


_DDP_START = """
import sys
import torch
import torch.distributed as dist
from raftrain._torch_loader import _DdpPasses
rank, port, ended, pass_index = (int(value) for value in sys.argv[1:])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
try:
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
    print(_DdpPasses(None, model)._started_ended({"ended": bool(ended), "pass": pass_index}))
except RuntimeError as error:
    print(error)
finally:
    dist.destroy_process_group()
"""


@pytest.mark.parametrize("ended", [False, True])
def test_ddp_ranks_that_start_different_passes_raise_unless_the_job_ended(ended):
    """`loader.ddp(model)`: two gloo ranks that read different passes at an iteration's start
    both raise, naming the other's pass, rather than average gradients of two passes; when
    the job ended on any rank, both stop instead (one `all_reduce` decides both)."""
    port = free_addr().split(":")[1]
    ranks = [
        subprocess.Popen([sys.executable, "-c", _DDP_START, str(rank), port, str(int(ended and rank == 1)), str(3 + rank)],
                         env=_env(), cwd=HERE, stdout=subprocess.PIPE, text=True)
        for rank in range(2)
    ]
    outputs = [rank.communicate(timeout=120)[0].strip() for rank in ranks]
    if ended:
        assert outputs == ["True", "True"], outputs
    else:
        assert outputs == [
            "rank 0 walks pass 3, another rank pass 4: the ranks disagree on the pass",
            "rank 1 walks pass 4, another rank pass 3: the ranks disagree on the pass",
        ], outputs


def test_one_iteration_is_one_pass_when_other_processes_hold_its_last_tasks(masters, tmp_path):
    """Two training processes of one job (no DDP) share its tasks unevenly: each process's
    `for batch in loader` ends only when the pass is over, so each walks the job's passes in
    order, never one pass in two iterations, and ends with the last; every task is finished
    once. A process that is slow between two iterations may find the next pass already run
    by the other (it then walks the one after: the pass index says which), so together, not
    each, they walk all three."""
    # The two start together: a process slow to start (a loaded machine) found the job
    # finished by the other and, rightly, raised JobEnded.
    meeting = ("--index", "1500", "--peers", "2", "--barrier", str(tmp_path / "barrier"))
    _all_succeed([_training(masters, rank, tmp_path / f"model-{rank}.pt", *meeting) for rank in range(2)])
    summaries = [json.loads((tmp_path / f"model-{rank}.pt.rank{rank}.json").read_text()) for rank in range(2)]
    for summary in summaries:
        walked = summary["passes_walked"]
        assert walked == sorted(set(walked)) and walked[-1] == 2, summaries
    assert set().union(*(summary["passes_walked"] for summary in summaries)) == {0, 1, 2}, summaries
    status = masters.status()
    assert status["job_finished"] and status["failed"] == 0
    assert sum(summary["finished"] for summary in summaries) == 3 * status["done"], summaries


def _training(masters, rank: int, out: Path, *arguments: str) -> subprocess.Popen:
    """A `torch_training.py` process of three passes with one DataLoader worker."""
    command = [sys.executable, str(HERE / "torch_training.py"), "--masters", masters.masters, "--passes", "3",
               "--rank", str(rank), "--workers", "1", "--out", str(out), *arguments]
    return subprocess.Popen(command, env=_env(), cwd=HERE)


def _all_succeed(processes) -> None:
    """Waits for every process to exit 0 (at most 10 minutes each); kills any still running."""
    try:
        for process in processes:
            assert process.wait(timeout=600) == 0
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()


def _plain_pytorch(net):
    """The same model, data and passes in one process: batches of 64 (DDP's 2 x 32), shuffled."""
    from torch_training import LEARNING_RATE

    points, labels = blobs(3000, seed=10)
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(points), torch.from_numpy(labels))
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.SGD(net.parameters(), lr=LEARNING_RATE)
    for _ in range(3):
        for features, target in loader:
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(net(features), target.long()).backward()
            optimizer.step()
    return net


def _accuracy(net) -> float:
    points, labels = blobs(2000, seed=11)
    with torch.no_grad():
        predicted = net(torch.from_numpy(points)).argmax(dim=1).numpy()
    return float(np.mean(predicted == labels.astype(np.int64)))


def _running(process: subprocess.Popen) -> bool:
    """True while `process` runs; fails the test at once if it exited."""
    code = process.poll()
    assert code is None, f"the training process exited early with {code}"
    return True


def _env() -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
    return env


def test_a_loaders_state_puts_the_data_back_where_it_was(masters):
    """`state_dict()` records a progress checkpoint; a new loader's `load_state_dict()` puts
    the job back to it, so the tasks consumed after it come again and nothing before it does;
    `batches_per_pass` is the batches of a pass, and `len()` is unknown (a `TypeError`)."""
    rows = torch.arange(40)
    read = _Rows(rows)

    def loader():
        return TaskDataset(masters.masters, index=("resume", 40, 10), read=read, passes=2, batch_size=5).loader()

    first = loader()
    assert first.batches_per_pass == 8
    with pytest.raises(TypeError, match="batches_per_pass"):
        len(first)
    batches = iter(first)
    consumed = [next(batches) for _ in range(3)]  # task 0's two batches are consumed: reported
    state = first.state_dict()
    assert state["pass_index"] == 0 and masters.status()["done"] == 1
    consumed += list(batches)  # the rest of pass 0: one iteration is one pass
    batches = iter(first)
    consumed += [next(batches) for _ in range(3)]  # part of pass 1
    assert masters.status()["pass"] == 1 and first.pass_index == 1
    second = loader()
    second.load_state_dict(state)
    assert second.pass_index == 0
    again = torch.cat(list(second)).tolist()
    assert sorted(again) == list(range(10, 40)), "the tasks done after the checkpoint, and only those"
    with pytest.raises(raftrain.InvalidArgument, match="raftrain_checkpoint"):
        second.load_state_dict({"epoch": 3})
    with pytest.raises(raftrain.InvalidArgument, match="raftrain_checkpoint"):
        second.load_state_dict(None)
    with pytest.raises(raftrain.InvalidArgument, match="the state is of job 'other', this loader's job is 'resume'"):
        second.load_state_dict({**state, "job": "other"})  # checkpoint ids count per job
    for garbled in ("abc", 1.5, True, -1, 2**64):
        with pytest.raises(raftrain.InvalidArgument, match="is not a checkpoint id"):
            second.load_state_dict({"raftrain_checkpoint": garbled})


def test_a_state_loaded_between_passes_decides_the_next_iterations_pass(masters):
    """Without workers, a pass the walk saw end needs no read of the job's state at the next
    iteration's start; a `load_state_dict()` in between still decides which pass it walks."""
    rows = torch.arange(20)
    loader = TaskDataset(masters.masters, index=("between", 20, 10), read=_Rows(rows), passes=3, batch_size=5).loader()
    state = loader.state_dict()
    assert sorted(torch.cat(list(loader)).tolist()) == list(range(20))
    assert loader.pass_index == 0 and masters.status()["pass"] == 1
    loader.load_state_dict(state)
    again = torch.cat(list(loader)).tolist()
    assert loader.pass_index == 0 and sorted(again) == list(range(20)), "pass 0 again, and only it"
    assert masters.status()["pass"] == 1
    assert sorted(torch.cat(list(loader)).tolist()) == list(range(20)) and loader.pass_index == 1


def test_a_loader_slow_between_passes_names_the_pass_it_walks(masters):
    """A training process (no workers) that saw its pass end and comes back after another ran
    the whole next pass walks the pass after it, and `pass_index` says so."""
    rows = torch.arange(20)

    def loader(name):
        dataset = TaskDataset(masters.masters, index=("late", 20, 10), read=_Rows(rows), passes=3, batch_size=5, name=name)
        return dataset.loader()

    slow, other = loader("slow"), loader("other")
    assert sorted(torch.cat(list(slow)).tolist()) == list(range(20)) and slow.pass_index == 0
    assert sorted(torch.cat(list(other)).tolist()) == list(range(20)) and other.pass_index == 1
    assert sorted(torch.cat(list(slow)).tolist()) == list(range(20))
    assert slow.pass_index == 2, "the pass it walked, not the one after its last"
    assert slow.job_finished


def test_a_loader_whose_worker_finds_its_pass_run_by_another_names_the_pass_it_walks(masters):
    """A training process with a DataLoader worker reads the job at pass 0, and another process
    runs the whole pass before that worker first asks (a process slow to start its workers):
    the iteration walks pass 1, and `pass_index` says so, not the pass read before."""
    rows = torch.arange(20)

    def loader(name, **options):
        dataset = TaskDataset(masters.masters, index=("late-worker", 20, 10), read=_Rows(rows), passes=2, batch_size=5, name=name)
        return dataset.loader(**options)

    late, other = loader("late", num_workers=1), loader("other")
    read, ran = late._job_status, []

    def read_then_the_other_runs_the_pass():
        status = read()
        if not ran:
            ran.append(sorted(torch.cat(list(other)).tolist()))
        return status

    late._job_status = read_then_the_other_runs_the_pass
    assert sorted(torch.cat(list(late)).tolist()) == list(range(20))
    assert ran == [list(range(20))] and other.pass_index == 0
    assert late.pass_index == 1, "the pass its worker walked"
    assert late.job_finished and late.refused == 0


def _start_after_pass_zero(masters: str, worker_id: int) -> None:
    """A DataLoader `worker_init_fn`: worker 1 starts once job `moved-on` left pass 0."""
    if worker_id == 1:
        client = raftrain.TaskClient(masters, job="moved-on")
        wait_until(lambda: client.status(lists=False)["pass"] >= 1, "pass 0 of job moved-on to end")


@pytest.mark.parametrize("persistent", [False, True])
def test_an_iteration_ends_before_a_batch_of_the_next_pass_a_late_worker_took(start_masters, persistent):
    """Two DataLoader workers, the second started only once the first ran the whole pass (one
    task): the second's walk, which yielded nothing of the pass, goes on to the next pass's
    task. The iteration ends before that batch (one iteration, one pass); the next iteration
    gets its task again at once (not consumed, so not reported), not at its timeout, from new
    workers or from persistent ones."""
    masters = start_masters(metrics=True)
    dataset = TaskDataset(masters.masters, index=("moved-on", 5, 5), read=_Rows(torch.arange(5)), passes=2, batch_size=5)
    late = functools.partial(_start_after_pass_zero, masters.masters)
    loader = dataset.loader(num_workers=2, worker_init_fn=late, persistent_workers=persistent)
    assert [batch.tolist() for batch in loader] == [list(range(5))] and loader.pass_index == 0
    assert [batch.tolist() for batch in loader] == [list(range(5))] and loader.pass_index == 1
    assert loader.job_finished and loader.refused == 0
    assert loader.client.status()["failed"] == 0
    assert masters.counter("raftrain_master_tasks_timed_out_total") == 0


def test_a_copied_dataset_makes_loaders_of_its_own():
    """A copy of a dataset (`copy.deepcopy`, as pickling does) comes without the original's
    loaders, registrations and reports, and makes loaders of its own (nothing is asked of the
    masters before an iteration)."""
    dataset = TaskDataset("127.0.0.1:1", index=("copied", 40, 10), read=_Rows(torch.arange(40)), batch_size=5)
    original = dataset.loader()
    copied = copy.deepcopy(dataset)
    loader = copied.loader()
    assert loader.dataset is copied and set(copied._loaders) == {loader} and set(dataset._loaders) == {original}


def test_a_loader_made_anew_for_each_pass_trains_each_pass_once(masters):
    """A new loader of the same dataset for each pass (as scripts do with a DataLoader): each
    trains its pass once. The dataset already knows the loop's pace, so a new loader asks
    ahead at its first task, before it queued a report of its own."""
    rows = torch.arange(40)
    dataset = TaskDataset(masters.masters, index=("anew", 40, 10), read=_Rows(rows), passes=3, batch_size=5)
    for pass_index in range(3):
        loader = dataset.loader()
        assert sorted(torch.cat(list(loader)).tolist()) == list(range(40))
        assert loader.pass_index == pass_index and loader.refused == 0
    assert loader.job_finished


@pytest.mark.parametrize("stopped_at, again", [(2, "the same loader"), (4, "the same loader"), (4, "a new loader")])
def test_a_loop_that_stops_inside_a_task_gets_that_task_back_at_once(masters, stopped_at, again):
    """A training loop that stops inside a task (a `break` at the first batch of the pass's
    second or third task, to look at a few batches) and iterates again, with the same loader
    or a new one of the same dataset (a notebook cell run again), gets that task again, whole,
    from the masters at once: it was not consumed, so not reported, and the iteration no
    longer waits for its timeout to hand it out again (each of the pass's tasks is dispatched
    once), though the registration holding it asks after others answered that nothing is
    free. The tasks before it are not seen again, even those whose finishes the first loader
    still held for its next ask (a new loader sends them before its registrations forget the
    tasks they hold)."""
    rows = torch.arange(40)
    dataset = TaskDataset(masters.masters, index=("stopped", 40, 10), read=_Rows(rows), passes=2, batch_size=5)
    first = dataset.loader()
    for number, _batch in enumerate(first):
        if number == stopped_at:
            break
    second = first if again == "the same loader" else dataset.loader()
    assert sorted(torch.cat(list(second)).tolist()) == list(range(stopped_at * 5, 40))
    # (A read of the job's state waits for the asks under way first.)
    assert not second.job_finished
    status = second.client.status()
    # A stopped task that waited out its timeout would have been dispatched again; pass 1's
    # first task is asked for as pass 0 ends (`PassAhead`), once the task timeout is known.
    assert status["pass"] == 1 and status["dispatched"] == 4 + dataset._pass_ahead.asked, status
    assert first.finished + (second.finished if second is not first else 0) == 4
    assert first.refused == second.refused == 0


def test_a_new_loader_takes_at_once_the_tasks_a_stopped_loaders_workers_held(start_masters):
    """A loop with DataLoader workers that stops inside a pass, then a new loader of the same
    dataset (a notebook cell run again): the trainers the stopped loader lent its workers
    leave the job, so the tasks those workers took go back to the queue at once, for the new
    loader's workers, rather than at their timeout. The stopped loader lends new trainers
    when it iterates again."""
    masters = start_masters(metrics=True)
    rows = torch.arange(80)
    dataset = TaskDataset(masters.masters, index=("stopped-workers", 80, 10), read=_Rows(rows), passes=2, batch_size=5)
    first = dataset.loader(num_workers=2)
    batches = []
    for batch in first:
        batches.append(batch)
        if len(batches) == 4:
            break
    second = dataset.loader(num_workers=2)
    # The batches the loop consumed (all but the one it stopped at) and the new loader's.
    assert set(torch.cat(batches[:-1] + list(second)).tolist()) == set(range(80))
    status = second.client.status()
    assert status["pass"] == 1 and status["failed"] == 0, status
    assert masters.counter("raftrain_master_tasks_timed_out_total") == 0 and masters.rpcs("LeaveJob") >= 1
    assert sorted(torch.cat(list(first)).tolist()) == list(range(80))
    assert first.job_finished and first.refused == second.refused == 0


def test_a_loader_reads_its_own_jobs_state_only(start_masters):
    """The loader reads its job's state at pass ends and in `job_finished` (a linearizable
    read, a heartbeat round of the leader's, each time): its own job's only, never the list of
    every job and rendezvous run that `TaskClient.status()` adds by default."""
    masters = start_masters(metrics=True)
    rows = torch.arange(40)
    dataset = TaskDataset(masters.masters, index=("own-state", 40, 10), read=_Rows(rows), passes=2, batch_size=5)
    loader = dataset.loader()
    seen = []
    while not loader.job_finished:
        seen.extend(torch.cat(list(loader)).tolist())
    assert sorted(seen) == sorted(list(range(40)) * 2)
    assert masters.rpcs("Status") >= 2
    assert masters.rpcs("ListJobs") == 0 and masters.rpcs("ListRendezvous") == 0


def test_a_job_cancelled_mid_pass_ends_the_loop_without_warning_of_take_backs(masters):
    """`raftrain job cancel` in the middle of a pass ends the loader's loop (`job_finished`),
    and the finishes the masters refused after the cancel are not warned of as tasks taken
    back to be trained again elsewhere: nothing is trained again."""
    rows = torch.arange(400)
    dataset = TaskDataset(masters.masters, index=("cut", 400, 10), read=_Rows(rows), passes=3, batch_size=5)
    loader = dataset.loader()
    batches = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        while not loader.job_finished:
            for _batch in loader:
                batches += 1
                if batches == 30:
                    run_tool("job", "cancel", "cut", "--masters", masters.masters)
    assert 30 <= batches < 80 * 3, batches
    assert loader.client.status()["job_cancelled"] is True
    assert not [str(each.message) for each in caught if "taken back" in str(each.message)]


def test_a_finish_refused_while_the_job_runs_is_warned_of(masters):
    """A finish the masters refused while the job runs (its task was taken back) is warned of
    once the loader knows the job was not cancelled; after a cancel it is not."""
    dataset = TaskDataset(masters.masters, index=("warned", 10, 5), read=_Rows(torch.arange(10)), batch_size=5)
    loader = dataset.loader()
    loader._answered(3, 1, False)
    with pytest.warns(UserWarning, match=r"task 3 \(dispatch 1\) was taken back"):
        loader._warn_refused(cancelled=False)
    loader._answered(4, 1, False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader._warn_refused(cancelled=True)
    assert loader.refused == 2


def test_workers_ask_as_the_trainers_their_training_process_lent_them(masters):
    """DataLoader workers are new processes each pass: the training process registers their
    trainers once and keeps them alive, so every pass's workers ask as the same trainers, and
    the tasks the workers held when the loop stopped inside the pass come back with the next
    iteration's workers at once (not a trainer lease later, handed out again)."""
    rows = torch.arange(80)
    dataset = TaskDataset(masters.masters, index=("lent", 80, 10), read=_Rows(rows), passes=3, batch_size=5, name="lent")
    loader = dataset.loader(num_workers=2)
    seen = []
    for number, batch in enumerate(loader):
        seen.extend(batch.tolist())
        if number == 2:
            break
    workers = lambda: sorted(each["id"] for each in loader.client.status()["trainers"] if each["name"].startswith("lent-w"))
    lent = workers()
    assert len(lent) == 2 * REGISTRATIONS_PER_WORKER, loader.client.status()["trainers"]
    passes = []
    while not loader.job_finished:
        passes.append(sorted(torch.cat(list(loader)).tolist()))
        assert workers() == lent, "the same trainers every pass"
    assert set(seen) | set(passes[0]) == set(range(80)) and passes[1:] == [list(range(80))] * 2
    assert loader.client.status()["dispatched"] == 8 * 3, "no task handed out twice in a pass"


@pytest.mark.timeout(120)
def test_a_worker_with_nothing_free_ends_its_walk_rather_than_hold_back_its_siblings(masters, monkeypatch):
    """The DataLoader takes its workers' batches in turn: a worker that found nothing free and
    waited there for the pass to end would keep the loop from the batches of the sibling that
    holds the pass's last task, whose finish ends the pass. One task of ten batches, two
    workers: one of them finds nothing free at its first ask and ends its walk at once (were it
    to wait as the training process does, for `PASS_END_IDLE_S`, set past this test's timeout,
    the loop would never get the task's second batch)."""
    monkeypatch.setattr(raftrain._torch_walk, "PASS_END_IDLE_S", 3600.0)
    rows = torch.arange(100)
    dataset = TaskDataset(masters.masters, index=("one-task", 100, 100), read=_Rows(rows), passes=2, batch_size=10)
    loader = dataset.loader(num_workers=2, multiprocessing_context="fork")  # the workers see the patch
    passes = [sorted(torch.cat(list(loader)).tolist()) for _ in range(2)]
    assert passes == [list(range(100))] * 2
    assert loader.job_finished and loader.finished == 2 and loader.refused == 0


def test_a_loader_lends_its_workers_its_own_trainers_though_another_lent_since(masters):
    """Two loaders with workers of one dataset, iterated in turn: each pass's workers ask as
    the trainers of the loader iterating, not those the other loader lent last (which that
    loader's workers use, and which stop being kept alive with that loader). A loader not
    iterating when the other begins has its lent trainers leave the job, and lends new ones
    when it iterates again."""
    rows = torch.arange(40)
    dataset = TaskDataset(masters.masters, index=("turns", 40, 10), read=_Rows(rows), passes=3, batch_size=5, name="turns")
    first, second = dataset.loader(num_workers=1), dataset.loader(num_workers=1)
    assert sorted(torch.cat(list(first)).tolist()) == list(range(40))
    lent_by_first = dict(dataset._lent)
    assert sorted(torch.cat(list(second)).tolist()) == list(range(40))
    assert dataset._lent != lent_by_first and first._lent == {}, "the first loader's trainers left"
    lent_by_second = dict(dataset._lent)
    batches = []
    for batch in first:
        assert dataset._lent == first._lent != lent_by_second, "the workers of the loader iterating get its trainers"
        assert set(first._lent[0]).isdisjoint(lent_by_first[0]), "new trainers, not those that left"
        batches.append(batch)
    assert sorted(torch.cat(batches).tolist()) == list(range(40)) and first.job_finished
    assert dataset._lent == {}, "the job ended: nothing lent any more"


def test_a_loader_whose_workers_persist_keeps_its_trainers_while_another_iterates(masters):
    """A loader with persistent workers, then another loader of the dataset, then the first
    again: the first's trainers do not leave the job while the second iterates, since its
    workers, alive between passes, ask as the trainers they were started with."""
    rows = torch.arange(40)
    dataset = TaskDataset(masters.masters, index=("persisting", 40, 10), read=_Rows(rows), passes=3, batch_size=5)
    first = dataset.loader(num_workers=1, persistent_workers=True)
    assert sorted(torch.cat(list(first)).tolist()) == list(range(40))
    lent_by_first = dict(first._lent)
    assert sorted(torch.cat(list(dataset.loader(num_workers=1))).tolist()) == list(range(40))
    assert first._lent == lent_by_first, "the persistent workers' trainers stayed"
    assert sorted(torch.cat(list(first)).tolist()) == list(range(40))
    assert first.job_finished and first.refused == 0 and masters.status()["failed"] == 0


class _Rows:
    def __init__(self, rows):
        self.rows = rows

    def __call__(self, start, end):
        return self.rows[start:end]


def test_a_loop_whose_job_finished_stops_heartbeating(start_masters):
    """Once the loop learned the job finished, its registrations stop heartbeating (a notebook
    kept open after training warns about nothing once the masters are gone): the masters drop
    them a lease later, while the dataset object is still alive."""
    group = start_masters(extra_args=["--trainer-lease-ms", "1000"])
    dataset = TaskDataset(group.masters, index=("ends", 8, 4), read=lambda start, end: torch.arange(start, end), passes=1, batch_size=4)
    loader = dataset.loader(num_workers=0)
    assert sorted(int(each) for batch in loader for each in batch) == list(range(8))
    assert loader.job_finished
    trainers = lambda: [each["name"] for each in group.status()["trainers"] if "-main-" in each["name"]]
    wait_until(lambda: not trainers(), "the loop's registrations to be dropped", 30)
    assert dataset.name and loader.pass_index is not None, "both still alive"


def test_a_collate_fn_is_given_each_batch_and_numpy_batches_become_tensors(masters):
    """A DataLoader option `collate_fn` converts each batch the dataset made (not the loader's
    own bookkeeping), and without one a `read` returning NumPy arrays yields tensors, as a
    DataLoader would."""
    read = lambda start, end: np.arange(start, end)
    dataset = TaskDataset(masters.masters, index=("converted", 8, 4), read=read, passes=1, batch_size=4)
    batches = list(dataset.loader(num_workers=0))
    assert all(isinstance(batch, torch.Tensor) for batch in batches)
    assert sorted(int(each) for batch in batches for each in batch) == list(range(8))
    doubled = TaskDataset(masters.masters, index=("doubled", 8, 4), read=read, passes=1, batch_size=4)
    batches = list(doubled.loader(num_workers=0, collate_fn=lambda batch: ("doubled", batch * 2)))
    assert all(tag == "doubled" for tag, _batch in batches)
    assert sorted(int(each) for _tag, batch in batches for each in batch) == list(range(0, 16, 2))
