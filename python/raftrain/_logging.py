"""Hands the Rust side's log events to Python's `logging`: a daemon thread takes each from the
extension's queue (`_native.next_log`, the GIL released while it waits) and logs it on the
`raftrain` logger's child named after the Rust module (`raftrain.client.retrying`). Which
events come at all is `RAFTRAIN_LOG`'s (a `tracing` filter, `warn` by default); the script's
handlers, levels and formats do the rest (with none configured, Python prints warnings and
errors to standard error without colour). A forked child starts its own thread."""

from __future__ import annotations

import logging
import threading

from . import _native

#: How long one wait for an event lasts before the thread looks again.
WAIT_S = 1.0


def _forward() -> None:
    _native.run_as_background()
    while True:
        record = _native.next_log(WAIT_S)
        if record is not None:
            level, logger, message = record
            logging.getLogger(logger).log(level, message)


def start() -> None:
    """Starts the forwarding thread of this process (at import, and in a forked child)."""
    threading.Thread(target=_forward, name="raftrain-log", daemon=True).start()
