"""Clear exceptions, never a hang or a panic: bad input is `InvalidArgument` (a `ValueError`
too), a group without a quorum is `DeadlineExceeded` (an `Unavailable`) within the deadline,
the server's own refusals keep its message, and a client inherited through `fork` refuses to
be used instead of hanging."""

from __future__ import annotations

import os

import pytest

import raftrain

from cluster import free_addr


def test_bad_addresses_and_arguments_are_invalid_arguments(tmp_path):
    """Refused before anything is sent: no addresses, an address that is not one, a deadline
    out of range, TLS files that do not exist (the file is named), an unknown fault."""
    with pytest.raises(raftrain.InvalidArgument):
        raftrain.TaskClient([])
    with pytest.raises(raftrain.InvalidArgument) as bad:
        raftrain.TaskClient("not an address at all")
    assert isinstance(bad.value, ValueError) and bad.value.code == "INVALID_ARGUMENT"
    with pytest.raises(raftrain.InvalidArgument, match="deadline_s"):
        raftrain.status(free_addr(), deadline_s=-1)
    missing = tmp_path / "missing.pem"
    with pytest.raises(raftrain.InvalidArgument, match="missing.pem"):
        raftrain.status(free_addr(), tls_ca=missing)


def test_no_quorum_is_unavailable_within_the_deadline(start_masters):
    """One master of three left: no leader can be elected, and a call fails with
    `DeadlineExceeded` (an `Unavailable`, a `TimeoutError`) saying no leader answered within its
    deadline."""
    group = start_masters()
    group.status()
    group.kill(0)
    group.kill(1)
    client = raftrain.TaskClient(group.masters, deadline_s=2.0)  # registers on first use
    with pytest.raises(raftrain.Unavailable) as raised:
        client.trainer_id
    assert isinstance(raised.value, raftrain.DeadlineExceeded) and isinstance(raised.value, TimeoutError)
    assert raised.value.code == "DEADLINE_EXCEEDED" and "no master leader answered within 2s" in raised.value.message


def test_nothing_listening_is_unavailable():
    """Addresses where nothing listens: `Unavailable`, naming the address tried."""
    with pytest.raises(raftrain.Unavailable) as raised:
        raftrain.status([free_addr(), free_addr()], deadline_s=1.0)
    assert "127.0.0.1" in raised.value.message


def test_the_servers_refusals_keep_their_message(masters, tmp_path):
    """A dataset pattern that matches nothing is refused by the master: `InvalidArgument`
    carrying the master's message, which names the pattern."""
    client = raftrain.TaskClient(masters.masters)
    with pytest.raises(raftrain.InvalidArgument) as raised:
        client.report_dataset(str(tmp_path / "nothing-here-*.recordio"), passes=1)
    assert "nothing-here-" in raised.value.message and "ReportDataset" in raised.value.message
    with pytest.raises(raftrain.InvalidArgument, match="neither"):
        client._native.fail(1, 1, "a reason", "neither")


def test_a_client_used_after_fork_refuses_instead_of_hanging(masters):
    """A forked child (as a DataLoader worker is) that uses its parent's client is told to make
    its own; a client it makes itself works."""
    parent = raftrain.TaskClient(masters.masters)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        code = 1
        try:
            try:
                parent.status()
            except raftrain.FailedPrecondition as error:
                if "make a new one in this process" in error.message:
                    code = 0 if raftrain.TaskClient(masters.masters).status()["leader"] else 2
            os.write(write, bytes([code]))
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    assert answer == b"\x00", f"child answered {answer!r}"
    assert parent.status()["leader"] is not None, "the parent's client still works"
