"""TLS and the token from Python: with the cluster's CA, certificate, key and token a client
works; without the token, or without TLS, no leader answers and the call fails as
`Unavailable` within its deadline (the token's refusal named)."""

from __future__ import annotations

import pytest

import raftrain

from cluster import run_tool
from data import write_blobs


def test_tls_and_token(start_masters, tmp_path):
    certs = tmp_path / "certs"
    run_tool("certs", "--out", str(certs))
    tls = {"tls_ca": certs / "ca.pem", "tls_cert": certs / "node.pem", "tls_key": certs / "node.key"}
    security = dict(tls, token_file=certs / "token")
    group = start_masters(security={key: str(value) for key, value in security.items()})
    group.status()
    write_blobs(tmp_path / "train.recordio", 20, seed=6, max_chunk_bytes=100_000)
    client = raftrain.TaskClient(group.masters, **security)
    client.report_dataset(str(tmp_path / "train.recordio"), passes=1)
    for task in client.tasks():
        with task:
            assert len(list(task.records())) == 20
    assert client.status()["job_finished"]
    # Leader discovery (the Rust client's) keeps asking until the deadline, and says why.
    with pytest.raises(raftrain.Unavailable) as no_token:
        raftrain.status(group.masters, deadline_s=2, **tls)
    assert "Unauthenticated" in no_token.value.message and "token" in no_token.value.message
    with pytest.raises(raftrain.Unavailable) as plain:
        raftrain.status(group.masters, deadline_s=2, token_file=certs / "token")
    assert "no master leader answered" in plain.value.message
