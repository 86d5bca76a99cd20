"""torchrun's rendezvous backend and c10d store on three real masters: each clause of torch's
`RendezvousBackend` contract, the store's c10d semantics, a retried add counted once across a
leader kill, the bounds, and the `torchrun.handlers` entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest
import torch.distributed as dist
from torch.distributed.elastic.rendezvous import RendezvousParameters
from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError, RendezvousStateError
from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler

import raftrain.rendezvous
from cluster import free_addr, run_tool
from raftrain import _native
from raftrain.rendezvous import RaftrainRendezvousBackend, RaftrainStore, create_backend


def params(masters, run_id="run42", **conf) -> RendezvousParameters:
    return RendezvousParameters(
        backend="raftrain", endpoint=masters.masters, run_id=run_id, min_nodes=1, max_nodes=2, **conf
    )


@pytest.fixture
def backend_and_store(masters):
    return create_backend(params(masters, read_timeout="5"))


def test_absent_state_is_none_and_a_first_write_needs_no_token(backend_and_store):
    backend, _ = backend_and_store
    assert backend.get_state() is None
    state, token, written = backend.set_state(b"round 0")
    assert (state, written) == (b"round 0", True)
    assert backend.get_state() == (b"round 0", token)
    again = backend.set_state(b"someone else's round 0")
    assert again == (b"round 0", token, False), "None writes only when no state exists"


def test_only_the_current_token_writes(backend_and_store):
    backend, _ = backend_and_store
    _, first, _ = backend.set_state(b"one")
    _, second, written = backend.set_state(b"two", first)
    assert written and second != first
    assert backend.set_state(b"stale", first) == (b"two", second, False)
    for foreign in (b"c10d-token", "2", True, -1, 0, 1.5, object()):
        assert backend.set_state(b"foreign", foreign) == (b"two", second, False), foreign
    assert backend.get_state() == (b"two", second)


def test_a_state_that_does_not_decode_is_a_state_error(backend_and_store):
    backend, store = backend_and_store
    store.set("torch.rendezvous.run42", b"%%% not base64 %%%")
    with pytest.raises(RendezvousStateError, match="corrupt"):
        backend.get_state()


def test_the_state_is_base64_under_the_c10d_key(backend_and_store):
    backend, store = backend_and_store
    backend.set_state(b"\x00\x01 state bytes")
    assert store.get("torch.rendezvous.run42") == b"AAEgc3RhdGUgYnl0ZXM="


def test_tokens_stay_valid_across_a_leader_kill(masters, backend_and_store):
    backend, store = backend_and_store
    _, token, _ = backend.set_state(b"before")
    leader = masters.leader_index()
    masters.kill(leader)
    _, token_after, written = backend.set_state(b"after", token)
    assert written, "the token read before the kill is still the current one"
    assert backend.set_state(b"late", token) == (b"after", token_after, False)
    masters.spawn(leader)


def test_a_retried_add_counts_once(masters):
    """The stamp makes an add exactly once: the same client's add, repeated by the client
    after a leader kill interrupted it, is counted once."""
    client = _native.RendezvousClient(masters.addrs, "adds", deadline_s=60.0)
    store = RaftrainStore(client, timedelta(seconds=5))
    counted = [store.add("n", 1) for _ in range(20)]
    leader = masters.leader_index()
    killer = threading.Timer(0.05, masters.kill, args=(leader,))
    killer.start()
    counted += [store.add("n", 1) for _ in range(20)]
    killer.join()
    assert counted == list(range(1, 41)), "every add answered its own count, none twice"
    assert int(store.get("n")) == 40
    masters.spawn(leader)


def test_the_store_behaves_as_a_c10d_store(backend_and_store):
    _, store = backend_and_store
    store.set("a", "text")
    assert store.get("a") == b"text"
    assert store.add("count", 5) == 5 and store.add("count", -2) == 3
    assert store.compare_set("cas", "", "first") == b"first"
    assert store.compare_set("cas", "wrong", "second") == b"first"
    assert store.compare_set("cas", "first", "second") == b"second"
    assert store.compare_set("absent", "expected", "x") == b"expected", "as TCPStore answers"
    assert store.check(["a", "count"]) and not store.check(["a", "missing"])
    store.multi_set(["m1", "m2"], [b"1", "2"])
    assert store.multi_get(["m1", "m2"]) == [b"1", b"2"]
    keys = store.num_keys()
    assert store.delete_key("m1") and not store.delete_key("m1")
    assert store.num_keys() == keys - 1
    prefixed = dist.PrefixStore("torch.rendezvous.run42.0", store)
    prefixed.set("MASTER_PORT", b"29500")
    assert store.get("torch.rendezvous.run42.0/MASTER_PORT") == b"29500"
    assert prefixed.get("MASTER_PORT") == b"29500"


def test_get_and_wait_wait_for_the_key_then_time_out(backend_and_store):
    _, store = backend_and_store
    threading.Timer(0.5, store.set, args=("late", b"here")).start()
    started = time.monotonic()
    assert store.get("late") == b"here"
    assert time.monotonic() - started >= 0.4, "get waited for the key"
    store.set_timeout(timedelta(seconds=1))
    with pytest.raises(dist.DistStoreError, match="did not appear"):
        store.get("never")
    with pytest.raises(dist.DistStoreError, match="did not appear"):
        store.wait(["late", "never"], timedelta(milliseconds=300))
    store.wait(["late"])


def test_bounds_are_refused_by_name(backend_and_store):
    _, store = backend_and_store
    with pytest.raises(dist.DistStoreError, match="at most 30720 bytes"):
        store.set("big", b"x" * (30 * 1024 + 1))
    store.compare_set("largest", b"", b"x" * (30 * 1024))
    assert store.compare_set("largest", b"x" * (30 * 1024), b"y" * (30 * 1024)) == b"y" * (30 * 1024), \
        "the largest compare_set fits one request"
    with pytest.raises(dist.DistStoreError, match="key must be 1 to 512 bytes"):
        store.set("k" * 513, b"v")
    store.set("word", b"forty")
    with pytest.raises(dist.DistStoreError, match="not a decimal integer"):
        store.add("word", 1)


def test_runs_are_apart_and_deleted_whole(masters):
    one = _native.RendezvousClient(masters.addrs, "one")
    two = _native.RendezvousClient(masters.addrs, "two")
    one.set("k", b"1")
    assert two.read(["k"])[0] == [None]
    assert one.delete_run() and not one.delete_run()
    assert one.read(["k"]) == ([None], 0)


def test_torch_finds_the_handler_through_its_entry_point(masters):
    handler = get_rendezvous_handler(params(masters, run_id="entry"))
    assert handler.get_backend() == "raftrain"


def test_a_script_that_imports_the_store_first_still_registers_the_handler(masters):
    """A script that imports `raftrain.rendezvous` before anything of torch's rendezvous (for
    `RaftrainStore`): torch loads its out-of-tree handlers during that import, and the entry
    point must not need the half-made module (torch would log a circular import and leave
    `raftrain` unregistered in that process)."""
    script = (
        "import raftrain.rendezvous\n"
        "from torch.distributed.elastic.rendezvous import RendezvousParameters\n"
        "from torch.distributed.elastic.rendezvous.registry import get_rendezvous_handler\n"
        f"params = RendezvousParameters(backend='raftrain', endpoint={','.join(masters.addrs)!r}, run_id='first', min_nodes=1, max_nodes=1)\n"
        "print(get_rendezvous_handler(params).get_backend())\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.strip() == "raftrain", ran.stdout + ran.stderr
    assert "registering out of tree plugin" not in ran.stderr and "circular import" not in ran.stderr, ran.stderr


def test_bad_parameters_are_refused_by_name(masters):
    with pytest.raises(ValueError, match="names no master"):
        create_backend(RendezvousParameters(backend="raftrain", endpoint="", run_id="r", min_nodes=1, max_nodes=1))
    with pytest.raises(ValueError, match="read_timeout"):
        create_backend(params(masters, read_timeout="soon"))
    for value in ("nan", "inf", "1e30", "0"):
        with pytest.raises(ValueError, match=f"read_timeout='{value}' must be more than 0 and at most 86400 seconds"):
            create_backend(params(masters, read_timeout=value))
    with pytest.raises(ValueError, match="localhost"):
        create_backend(RendezvousParameters(backend="raftrain", endpoint="localhost", run_id="r", min_nodes=1, max_nodes=1))


def test_masters_never_reached_cost_one_deadline_then_short_ones(start_masters):
    """A wrong endpoint (nothing listens there) fails the first call after the whole `deadline`;
    a later call (torch reads and writes the state once more as it shuts the failed rendezvous
    down) retries for at most `UNREACHED_DEADLINE_S`, so torchrun fails after one deadline, not
    two. A run whose masters answer keeps its whole deadline."""
    nowhere = RendezvousParameters(backend="raftrain", endpoint=free_addr(), run_id="nowhere", min_nodes=1, max_nodes=1, deadline="3")
    backend, store = create_backend(nowhere)
    with pytest.raises(RendezvousConnectionError, match="within 3s"):
        backend.get_state()
    with pytest.raises(RendezvousConnectionError, match=f"within {raftrain.rendezvous.UNREACHED_DEADLINE_S:g}s"):
        backend.set_state(b"state")
    with pytest.raises(dist.DistStoreError, match=f"within {raftrain.rendezvous.UNREACHED_DEADLINE_S:g}s"):
        store.set("key", b"value")
    group = start_masters()
    reached, _store = create_backend(params(group, run_id="reached", deadline="3"))
    assert reached.get_state() is None
    for index in range(3):
        group.kill(index)
    for _call in range(2):
        with pytest.raises(RendezvousConnectionError, match="within 3s"):
            reached.get_state()


def test_operators_list_and_delete_runs_from_the_command_line(masters):
    client = _native.RendezvousClient(masters.addrs, "ops-run")
    client.set("k", b"value")
    listed = json.loads(run_tool("rendezvous", "list", "--json", "--masters", masters.masters))
    assert [run["run"] for run in listed["runs"]] == ["ops-run"]
    assert listed["runs"][0]["keys"] == 1 and listed["idle_expiry_ms"] == 86_400_000
    status = json.loads(run_tool("status", "--json", "--masters", masters.masters))
    assert [run["run"] for run in status["rendezvous"]] == ["ops-run"]
    assert b"ops-run" in run_tool("status", "--masters", masters.masters)
    assert b"deleted" in run_tool("rendezvous", "delete", "ops-run", "--masters", masters.masters)
    with pytest.raises(AssertionError, match="no rendezvous run"):
        run_tool("rendezvous", "delete", "ops-run", "--masters", masters.masters)
    assert client.read(["k"]) == ([None], 0)


def test_each_round_set_is_summarized_for_operators(masters):
    import pickle

    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import _NodeDesc, _RendezvousState

    backend, _ = create_backend(params(masters, run_id="summed"))
    held = _RendezvousState()
    held.round = 3
    held.complete = True
    held.participants[_NodeDesc("node-a", 1, 0)] = 0
    held.participants[_NodeDesc("node-b", 2, 0)] = 1
    held.wait_list.add(_NodeDesc("node-c", 3, 0))
    _, _, written = backend.set_state(pickle.dumps(held))
    assert written
    listed = json.loads(run_tool("rendezvous", "list", "--json", "--masters", masters.masters))
    (run,) = [run for run in listed["runs"] if run["run"] == "summed"]
    assert run["round"] == {"round": 3, "participants": 2, "waiting": 1, "complete": True}
    text = run_tool("status", "--masters", masters.masters)
    assert b"round 3 (complete), 2 participants, 1 waiting" in text, text
