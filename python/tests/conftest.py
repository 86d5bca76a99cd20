"""Fixtures: real master groups and pservers under a test's temporary directory, stopped
(kill -9) when the test ends; their logs are printed when it fails."""

from __future__ import annotations

import weakref

import pytest

from cluster import MasterGroup, PServers
from raftrain.task_client import TaskClient


@pytest.fixture(autouse=True)
def close_task_clients(monkeypatch):
    """Every `TaskClient` a test made in this process (its datasets' and loaders' too) stops
    heartbeating when the test ends. One still referenced (by a failed assertion's traceback, a
    cycle not collected yet) would otherwise go on asking the test's killed masters for a
    leader, ten tries a second, through the tests that follow, on the same two cores."""
    made: "weakref.WeakSet[TaskClient]" = weakref.WeakSet()
    init = TaskClient.__init__

    def remembered(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.add(self)

    monkeypatch.setattr(TaskClient, "__init__", remembered)
    yield
    for client in list(made):
        client.close()


@pytest.fixture
def masters(tmp_path, request):
    """Three masters, elected and answering."""
    group = MasterGroup(tmp_path)
    try:
        group.status()
        yield group
    finally:
        group.stop()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            print(group.logs()[-20000:])


@pytest.fixture
def start_masters(tmp_path):
    """A factory for master groups with arguments (security, count); all stopped at the end."""
    groups = []

    def start(**kwargs) -> MasterGroup:
        directory = tmp_path / f"group-{len(groups)}"
        directory.mkdir()
        group = MasterGroup(directory, **kwargs)
        groups.append(group)
        return group

    try:
        yield start
    finally:
        for group in groups:
            group.stop()


@pytest.fixture
def start_pservers(tmp_path):
    started = []

    def start(masters: str, count: int, job=None) -> PServers:
        directory = tmp_path / f"pservers-{len(started)}"
        directory.mkdir()
        pservers = PServers(directory, masters, count, job)
        started.append(pservers)
        return pservers

    try:
        yield start
    finally:
        for pservers in started:
            pservers.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
