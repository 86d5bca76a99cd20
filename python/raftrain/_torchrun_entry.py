"""The `torchrun.handlers` entry point `raftrain` (pyproject.toml): `--rdzv-backend=raftrain`.

torch loads its out-of-tree handlers as `torch.distributed.elastic.rendezvous` is first
imported, which may happen inside `raftrain.rendezvous` itself (a script that imports it first,
for `RaftrainStore`): that module is then half made, and a handler found there would fail to
register (torch logs the circular import and torchrun in that process knows no `raftrain`).
So this module imports neither torch nor `raftrain.rendezvous`; the handler's module is
imported when torch makes a handler, by then whole."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from torch.distributed.elastic.rendezvous.api import RendezvousHandler, RendezvousParameters


def handler() -> Callable[["RendezvousParameters"], "RendezvousHandler"]:
    """What torch calls once and registers under the entry point's name, `raftrain`."""
    return create_rendezvous_handler


def create_rendezvous_handler(params: "RendezvousParameters") -> "RendezvousHandler":
    """A rendezvous handler for `params` (`raftrain.rendezvous.create_rendezvous_handler`)."""
    from .rendezvous import create_rendezvous_handler as create

    return create(params)
