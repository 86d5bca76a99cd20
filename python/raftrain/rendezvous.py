"""torchrun's rendezvous on a raftrain master group: ``--rdzv-backend=raftrain``.

An elastic PyTorch job then needs neither etcd nor a store host: torch's own dynamic rendezvous
algorithm (``dynamic_rendezvous.create_handler``) runs over a backend and a c10d ``Store``
whose state lives in the master group, replicated by Raft, so no single node takes the
rendezvous down with it::

    torchrun --nnodes=1:4 --nproc-per-node=8 --max-restarts=3 \\
      --rdzv-backend=raftrain --rdzv-endpoint=m1:7000,m2:7000,m3:7000 --rdzv-id=run42 train.py

torchrun finds this module through the ``torchrun.handlers`` entry point ``raftrain``
(``_torchrun_entry.handler``, which imports it only when torch makes a handler). ``--rdzv-conf`` keys: ``tls_ca``, ``tls_cert``, ``tls_key``, ``token_file``
(else ``RAFTRAIN_TLS_CA``, ``RAFTRAIN_TLS_CERT``, ``RAFTRAIN_TLS_KEY``,
``RAFTRAIN_TOKEN_FILE``), ``read_timeout`` (seconds a store read waits for its key; 60),
``deadline`` (seconds a call retries while no master leads; 60; once a call gave up before any
reached a leader, each later one retries for at most two seconds, so a wrong endpoint fails
torchrun after one deadline).

The backend keeps torch's state under the store key ``torch.rendezvous.<run_id>`` (base64, as
torch's c10d backend does); its fencing token is the key's version, which the masters never
reuse within a run. After each state it sets it writes a summary of the round (JSON: round,
participants, waiting, complete) under ``raftrain.rendezvous.summary``, which ``raftrain
status``, ``raftrain rendezvous list`` and the dashboard show.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import pickle
from datetime import timedelta
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import torch.distributed as dist
from torch.distributed.elastic.rendezvous.api import (
    RendezvousConnectionError,
    RendezvousHandler,
    RendezvousInfo,
    RendezvousParameters,
    RendezvousStateError,
)
from torch.distributed.elastic.rendezvous.dynamic_rendezvous import (
    DynamicRendezvousHandler,
    RendezvousBackend,
    create_handler,
)

from . import _native, errors

#: Seconds a store read waits for its key unless ``read_timeout`` says otherwise (c10d's).
READ_TIMEOUT_S_DEFAULT = 60
#: Seconds a call retries across leader changes unless ``deadline`` says otherwise.
DEADLINE_S_DEFAULT = 60.0
#: The longest `--rdzv-conf` time in seconds (a day, as the masters' longest deadline): NaN,
#: infinity and more are refused by name rather than by a conversion deep in the handler.
CONF_SECONDS_MAX = 86400.0

#: Once a call gave up without any call of the run having reached a leader (a wrong
#: ``--rdzv-endpoint``, masters not started), each later call retries for at most this long,
#: not the whole ``deadline`` again: torch reads and writes the state once more as it shuts the
#: failed rendezvous down, which doubled the wait for the error.
UNREACHED_DEADLINE_S = 2.0

_Value = Union[str, bytes, bytearray]


class _Reach:
    """A run's native client, shared by its backend and store, and whether any call reached a
    leader yet: once one gave up without that, later calls go through a client whose deadline
    is ``UNREACHED_DEADLINE_S`` (a call that reaches a leader then restores the whole one)."""

    def __init__(self, client: "_native.RendezvousClient", quick: Optional[Callable[[], "_native.RendezvousClient"]] = None):
        self.client = client
        self._quick = quick
        self._quick_client: Optional["_native.RendezvousClient"] = None
        self._reached = False
        self._gave_up = False

    @staticmethod
    def of(client: "Union[_Reach, _native.RendezvousClient]") -> "_Reach":
        return client if isinstance(client, _Reach) else _Reach(client)

    @property
    def run(self) -> str:
        return self.client.run

    def call(self, name: str, *args: Any) -> Any:
        """``client.name(*args)``; raises what it raises."""
        client = self.client
        if self._gave_up and not self._reached and self._quick is not None:
            self._quick_client = self._quick_client or self._quick()
            client = self._quick_client
        try:
            result = getattr(client, name)(*args)
        except errors.Unavailable:
            self._gave_up = self._gave_up or not self._reached
            raise
        self._reached = True
        return result


def _bytes(value: _Value) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    raise TypeError(f"a store value is str or bytes, not {type(value).__name__}")


def _seconds(timeout: Optional[timedelta], default: timedelta) -> float:
    return (timeout if timeout is not None else default).total_seconds()


# (c10d's Store, which torch.distributed re-exports without declaring it public.)
class RaftrainStore(dist.Store):  # pyright: ignore[reportPrivateImportUsage]
    """A c10d ``Store`` over one rendezvous run's keys on the master group.

    ``get`` and ``wait`` wait for their keys up to the store's timeout (``set_timeout``) and
    then raise ``torch.distributed.DistStoreError``, as c10d stores do; every other failure
    (no master answered within the client's deadline, a bound passed) is a
    ``DistStoreError`` too, naming the cause. ``add`` counts once even when a leader change
    makes the client retry it.
    """

    def __init__(self, client: "Union[_Reach, _native.RendezvousClient]", timeout: timedelta = timedelta(seconds=READ_TIMEOUT_S_DEFAULT)):
        super().__init__()  # the pybind trampoline needs it
        self._client = _Reach.of(client)
        self.set_timeout(timeout)

    @property
    def run_id(self) -> str:
        return self._client.run

    def _timeout(self) -> timedelta:
        """The store's timeout (`set_timeout`): c10d's `timeout` property, which torch's type
        stubs leave out."""
        return self.timeout  # type: ignore[attr-defined]

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return self._client.call(name, *args)
        except errors.Error as error:
            raise dist.DistStoreError(f"raftrain store {name}: {error}") from error

    def set(self, key: str, value: _Value) -> None:
        self._call("set", key, _bytes(value))

    def get(self, key: str) -> bytes:
        entries, _ = self._call("read", [key], self._timeout().total_seconds())
        if entries[0] is None:
            raise dist.DistStoreError(f"raftrain store: key {key!r} did not appear within {self._timeout()}")
        return entries[0][0]

    def add(self, key: str, value: int) -> int:
        return self._call("add", key, int(value))

    def compare_set(self, key: str, expected_value: _Value, desired_value: _Value) -> bytes:
        """c10d's compare_set: the key takes ``desired_value`` if it holds ``expected_value``,
        or is absent and ``expected_value`` is empty; answers the value after. For an absent
        key and a non-empty ``expected_value`` it answers ``expected_value``, as c10d's
        ``TCPStore`` does."""
        expected = _bytes(expected_value)
        entry, _ = self._call("compare_set", key, expected, _bytes(desired_value))
        return expected if entry is None else entry[0]

    def check(self, keys: Sequence[str]) -> bool:
        entries, _ = self._call("read", list(keys), 0.0)
        return all(entry is not None for entry in entries)

    def wait(self, keys: Sequence[str], timeout: Optional[timedelta] = None) -> None:
        seconds = _seconds(timeout, self._timeout())
        entries, _ = self._call("read", list(keys), seconds)
        missing = [key for key, entry in zip(keys, entries) if entry is None]
        if missing:
            raise dist.DistStoreError(f"raftrain store: keys {missing!r} did not appear within {seconds} s")

    def multi_get(self, keys: Sequence[str]) -> List[bytes]:
        entries, _ = self._call("read", list(keys), self._timeout().total_seconds())
        missing = [key for key, entry in zip(keys, entries) if entry is None]
        if missing:
            raise dist.DistStoreError(f"raftrain store: keys {missing!r} did not appear within {self._timeout()}")
        return [entry[0] for entry in entries]

    def multi_set(self, keys: Sequence[str], values: Sequence[_Value]) -> None:
        if len(keys) != len(values):
            raise ValueError(f"multi_set: {len(keys)} keys but {len(values)} values")
        for key, value in zip(keys, values):
            self.set(key, value)

    def delete_key(self, key: str) -> bool:
        return self._call("delete", key)

    def num_keys(self) -> int:
        _, key_count = self._call("read", [], 0.0)
        return key_count


#: Where the backend summarizes each round it sets (``client::RENDEZVOUS_SUMMARY_KEY``).
SUMMARY_KEY = "raftrain.rendezvous.summary"

_log = logging.getLogger(__name__)


class RaftrainRendezvousBackend(RendezvousBackend):
    """torch's ``RendezvousBackend`` on the master group: the state under the store key
    ``torch.rendezvous.<run_id>`` (base64), fenced by the key's version."""

    def __init__(self, client: "Union[_Reach, _native.RendezvousClient]", run_id: str):
        if not run_id:
            raise ValueError("The run id must be a non-empty string.")
        self._client = _Reach.of(client)
        self._key = "torch.rendezvous." + run_id

    @property
    def name(self) -> str:
        return "raftrain"

    def get_state(self) -> Optional[Tuple[bytes, Any]]:
        entries, _ = self._call("read", [self._key], 0.0)
        return None if entries[0] is None else self._decode(entries[0])

    def set_state(self, state: bytes, token: Optional[Any] = None) -> Optional[Tuple[bytes, Any, bool]]:
        version = self._version(token)
        if version is None:  # a stale, foreign or malformed token is never current
            current = self.get_state()
            return None if current is None else (*current, False)
        encoded = base64.b64encode(state)
        entry, written = self._call("compare_version", self._key, version, encoded)
        if entry is None:
            return None
        now_state, now_token = self._decode(entry)
        if written:
            self._summarize(state)
        return now_state, now_token, written

    def _summarize(self, state: bytes) -> None:
        """Writes what operators see of the round this process just set (best effort: the
        summary only informs, and the state is already written)."""
        try:
            # The bytes this process's own rendezvous handler just pickled.
            held = pickle.loads(state)  # noqa: S301
            summary = {
                "round": int(held.round),
                "participants": len(held.participants),
                "waiting": len(held.wait_list),
                "complete": bool(held.complete),
            }
            self._client.call("set", SUMMARY_KEY, json.dumps(summary).encode())
        except Exception as error:  # noqa: BLE001 - a summary never fails a rendezvous
            _log.debug("no rendezvous summary written: %s", error)

    @staticmethod
    def _version(token: Optional[Any]) -> Optional[int]:
        if token is None:
            return 0
        if isinstance(token, int) and not isinstance(token, bool) and token > 0:
            return token
        return None

    def _decode(self, entry: Tuple[bytes, int]) -> Tuple[bytes, int]:
        value, version = entry
        try:
            return base64.b64decode(value, validate=True), version
        except (binascii.Error, ValueError) as error:
            raise RendezvousStateError(
                f"The rendezvous state under {self._key!r} (version {version}) is not base64: it is corrupt."
            ) from error

    def _call(self, name: str, *args: Any) -> Any:
        try:
            return self._client.call(name, *args)
        except errors.Error as error:
            raise RendezvousConnectionError(
                f"The connection to the raftrain masters has failed: {error}"
            ) from error


def _conf(params: RendezvousParameters, key: str, env: str) -> Optional[str]:
    value = params.get(key)
    return value if value else os.environ.get(env) or None


def _positive(params: RendezvousParameters, key: str, default: float) -> float:
    value = params.get(key, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"--rdzv-conf {key}={value!r} is not a number of seconds") from None
    if not 0 < number <= CONF_SECONDS_MAX:
        raise ValueError(f"--rdzv-conf {key}={value!r} must be more than 0 and at most {CONF_SECONDS_MAX:.0f} seconds")
    return number


def _client(params: RendezvousParameters) -> _Reach:
    masters = [addr.strip() for addr in (params.endpoint or "").split(",") if addr.strip()]
    if not masters:
        raise ValueError("--rdzv-endpoint names no master: give the masters as host:port,host:port,...")
    deadline_s = _positive(params, "deadline", DEADLINE_S_DEFAULT)

    def connect(deadline_s: float) -> "_native.RendezvousClient":
        return _native.RendezvousClient(
            masters,
            params.run_id,
            tls_ca=_conf(params, "tls_ca", "RAFTRAIN_TLS_CA"),
            tls_cert=_conf(params, "tls_cert", "RAFTRAIN_TLS_CERT"),
            tls_key=_conf(params, "tls_key", "RAFTRAIN_TLS_KEY"),
            token_file=_conf(params, "token_file", "RAFTRAIN_TOKEN_FILE"),
            deadline_s=deadline_s,
        )

    try:
        return _Reach(connect(deadline_s), lambda: connect(min(deadline_s, UNREACHED_DEADLINE_S)))
    except errors.InvalidArgument as error:
        raise ValueError(f"--rdzv-backend=raftrain: {error.message}") from error


def create_backend(params: RendezvousParameters) -> Tuple[RaftrainRendezvousBackend, RaftrainStore]:
    """The backend and the store for ``params``, in the shape of torch's own
    ``c10d_rendezvous_backend.create_backend``."""
    client = _client(params)
    read_timeout = timedelta(seconds=_positive(params, "read_timeout", READ_TIMEOUT_S_DEFAULT))
    return RaftrainRendezvousBackend(client, params.run_id), RaftrainStore(client, read_timeout)


class RaftrainRendezvousHandler(DynamicRendezvousHandler):
    """torch's dynamic rendezvous, with one repair: every round gets a fresh TCP store for
    its workers (``MASTER_ADDR``, ``MASTER_PORT``), hosted by that round's rank 0 and
    published under that round's keys.

    torch builds the workers' store once per node and reuses it while the node's rank
    allows, which breaks a world that changes: a node that stays rank 0 into a later round
    (the world grew) hands the new workers the store the old ones wrote their addresses in,
    so a newcomer connects to a worker that is gone; a node that was rank 0 and is now rank
    1 (a newcomer sorts first) points its workers at its own old store, so the two halves of
    the world never meet. Forgetting the store before each round makes torch build it the
    way it builds the first one (rank 0 listens on a port the system picks and publishes
    it; every other rank reads it from the round's keys); the old store closes with the
    workers that used it.
    """

    def next_rendezvous(self) -> RendezvousInfo:
        self._shared_tcp_store_server = None
        self._bootstrap_store_info = None
        return super().next_rendezvous()


def create_rendezvous_handler(params: RendezvousParameters) -> RendezvousHandler:
    """torch's dynamic rendezvous over the raftrain backend and store (torch's own
    ``create_handler`` reads the parameters; the handler it makes gains the repair of
    ``RaftrainRendezvousHandler``, which adds no state)."""
    backend, store = create_backend(params)
    handler = create_handler(store, backend, params)
    handler.__class__ = RaftrainRendezvousHandler
    return handler
