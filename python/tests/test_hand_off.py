"""A task hand-off in one replicated write: a step carries the finishes of the tasks done
since the last one (`TaskClient.step(finished=...)`, `tasks()` with a `with` block, the
loader's asks), the masters apply them before the ask, and masters that cannot (a group held
at feature level 2, refusing them before anything is applied) take them one by one, which the
caller cannot tell apart but by the log."""

from __future__ import annotations

import concurrent.futures

import pytest

import raftrain
from raftrain.errors import InvalidArgument

from cluster import leader_log_index, run_tool, wait_until

HAND_OFFS = 10


def hand_offs(group, level: int) -> int:
    """`HAND_OFFS` tasks taken, each finished with the ask for the next, at feature level
    `level`: the entries they took, after checking each finish was accepted and each ask handed
    out the next task (a plain ask would answer the task still held)."""
    wait_until(lambda: group.status()["feature_level"] == level, f"the group at feature level {level}")
    client = raftrain.TaskClient(group.masters, name="handing", job="hand")
    client.report_index_dataset("hand", HAND_OFFS + 1, 1, passes=1)
    task = client.next_task()
    before = leader_log_index(group)
    seen = [task.task_id]
    for _ in range(HAND_OFFS):
        step = client.step(finished=[task])
        assert step.finished == (True,), step
        assert step.kind == raftrain.StepKind.Task and step.task.task_id not in seen, step
        task = step.task
        seen.append(task.task_id)
    entries = leader_log_index(group) - before
    last = client.step(finished=[(task.task_id, task.dispatch)])
    assert (last.kind, last.finished) == (raftrain.StepKind.Finished, (True,))
    assert sorted(seen) == list(range(HAND_OFFS + 1))
    return entries


def test_a_hand_off_is_one_write(masters):
    """At this build's feature level, a step with a finish is one entry (two writes would be
    two, and the leader's own decisions are few in a second)."""
    entries = hand_offs(masters, 3)
    assert entries < HAND_OFFS * 3 // 2, f"{entries} entries for {HAND_OFFS} hand-offs"


def test_a_group_below_level_3_takes_the_finishes_one_by_one(start_masters):
    """A group held at level 2 refuses the receipts before applying anything; the client
    reports the finish and then asks: the same answers, two writes each."""
    group = start_masters(extra_args=["--feature-level", "2"])
    entries = hand_offs(group, 2)
    assert entries >= HAND_OFFS * 2, f"{entries} entries for {HAND_OFFS} hand-offs one by one"


def test_tasks_reports_a_finished_block_with_the_next_ask(masters):
    """`tasks()` reports a `with` block's task with the next ask (one write each), and a task
    finished last before the loop stops early on its own: none is left held."""
    client = raftrain.TaskClient(masters.masters, name="looping", job="loop")
    client.report_index_dataset("loop", 6, 1, passes=1)
    done = []
    for task in client.tasks():
        with task:
            done.append(task.task_id)
        if len(done) == 3:
            break
    assert sorted(done) == [0, 1, 2]
    wait_until(lambda: masters.status()["done"] == 3, "the early stop's last finish reported")
    for task in client.tasks():
        with task:
            done.append(task.task_id)
    assert sorted(done) == list(range(6))
    status = masters.status()
    assert status["job_finished"] and status["dispatched"] == 6, status


def test_too_many_finishes_in_one_step_are_refused(masters):
    client = raftrain.TaskClient(masters.masters, name="greedy", job="greedy")
    client.report_index_dataset("greedy", 4, 1, passes=1)
    with pytest.raises(InvalidArgument, match="at most 16"):
        client.step(finished=[(0, 1)] * (raftrain.task_client.FINISHED_PER_STEP_MAX + 1))


def test_steps_started_together_share_a_write_and_a_count_out_of_bounds_is_refused(masters):
    """Two clients' `step_ahead(together=2)`, each carrying its own finish, both answered a
    task of their own; over several rounds they take fewer entries than asks. That bound also
    holds once the batcher's pace has learned that two come back together, so it checks the
    answers more than the count: `cli/tests/it/asks_together.rs` is the test that fails with
    the count left at 1. A count from 1 to `ASKS_TOGETHER_MAX` only."""
    wait_until(lambda: masters.status()["feature_level"] >= 3, "the group at feature level 3 (hand-offs)")
    clients = [raftrain.TaskClient(masters.masters, name=f"pair-{index}", job="pair") for index in range(2)]
    clients[0].report_index_dataset("pair", 40, 1, passes=1)
    held = [client.next_task() for client in clients]
    before, rounds = leader_log_index(masters), 10
    for _ in range(rounds):
        pending = [client.step_ahead([(task.task_id, task.dispatch)], together=2) for client, task in zip(clients, held)]
        steps = [each.result() for each in pending]
        assert all(step.finished == (True,) and step.kind == raftrain.StepKind.Task for step in steps), steps
        held = [step.task for step in steps]
        assert held[0].task_id != held[1].task_id
    assert leader_log_index(masters) - before < 2 * rounds, "no two asks sent together shared an entry"
    for together in (0, raftrain.task_client.ASKS_TOGETHER_MAX + 1):
        with pytest.raises(InvalidArgument, match=f"together={together}: from 1 to 8"):
            clients[0].step_ahead(together=together)


def test_steps_gathered_go_in_one_call_each_answered_its_own_and_bad_rounds_are_refused(masters):
    """Three clients' `step_ahead(together=AskGather(3))`, each carrying its own finish, go
    to the leader in one call (`answered_in_one_call`), each answered a task of its own with
    every finish accepted, round after round, until the job ends with each task handed out
    once. A round's count from 1 to `ASKS_TOGETHER_MAX`; `together` a count
    or an `AskGather`."""
    wait_until(lambda: masters.status()["feature_level"] >= 3, "the group at feature level 3 (hand-offs)")
    clients = [raftrain.TaskClient(masters.masters, name=f"gathered-{index}", job="gathered") for index in range(3)]
    clients[0].report_index_dataset("gathered", 30, 1, passes=1)
    held = [client.next_task() for client in clients]
    seen = [task.task_id for task in held]
    for _ in range(9):
        gather = raftrain.task_client.AskGather(3)
        pending = [client.step_ahead([(task.task_id, task.dispatch)], together=gather) for client, task in zip(clients, held)]
        steps = [each.result() for each in pending]
        assert all(step.finished == (True,) and step.kind == raftrain.StepKind.Task for step in steps), steps
        assert gather.answered_in_one_call, "the round went in calls of their own"
        held = [step.task for step in steps]
        seen.extend(task.task_id for task in held)
    assert sorted(seen) == list(range(30)), "each task handed out once"
    last = [client.step([(task.task_id, task.dispatch)]) for client, task in zip(clients, held)]
    assert last[-1].kind == raftrain.StepKind.Finished and all(step.finished == (True,) for step in last), last
    for count in (0, raftrain.task_client.ASKS_TOGETHER_MAX + 1):
        with pytest.raises(InvalidArgument, match=f"{count} asks gathered; from 1 to 8"):
            raftrain.task_client.AskGather(count)
    with pytest.raises(TypeError, match="a count of steps or an AskGather"):
        clients[0].step_ahead(together="3")


def test_a_step_asked_ahead_hands_off_in_the_background_and_answers_alike_again(masters):
    """`step_ahead` returns at once; its `result()` is the step (the finish it carries
    accepted, the next task handed out), the same object each time it is asked, from any
    thread; a step of a cancelled job answers `Cancelled`."""
    client = raftrain.TaskClient(masters.masters, name="ahead", job="ahead")
    client.report_index_dataset("ahead", 3, 1, passes=1)
    task = client.next_task()
    pending = client.step_ahead([(task.task_id, task.dispatch)])
    wait_until(pending.done, "the step asked ahead answered")
    step = pending.result()
    assert step.finished == (True,) and step.kind == raftrain.StepKind.Task, step
    assert step.task.task_id != task.task_id
    assert pending.result() is step
    assert masters.status()["done"] == 1
    # Two threads taking one answer at once both get it (neither holds the other up).
    ahead = client.step_ahead([(step.task.task_id, step.task.dispatch)])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda _: ahead.result(), range(2)))
    receipts = {(answer.task.task_id, answer.task.dispatch, answer.finished) for answer in answers}
    assert len(receipts) == 1 and answers[0].finished == (True,), answers
    client.cancel("ahead")
    assert client.step_ahead().result().kind == raftrain.StepKind.Cancelled
