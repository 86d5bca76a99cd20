"""`PServerClient`: a job's model on raftrain's parameter servers, as NumPy float32 arrays.

It is the Rust `client::pserver::PServerClient`: it follows the master's pserver table, splits
tensors into blocks per slot, sends to every pserver in parallel, and rides out a replaced
pserver (waiting for the new holder, re-initializing one that came up empty from the newest
values this client saw). Tensors cross into Rust as whole buffers: no Python work per element.
"""

from __future__ import annotations

import json
import os
import random
import struct
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np
import numpy.typing as npt

from . import _native
from .errors import InvalidArgument
from .task_client import DEADLINE_S_DEFAULT, Masters, PathArg, _count, _path, master_list

#: Parameters are cut into blocks of this many elements, spread over the pserver slots.
BLOCK_ELEMENTS_DEFAULT = 65_536


class PServerClient:
    """`init(params)`, then `push(grads)` and `pull()`; the optimizer runs on the pservers of
    job `job` (by default the group's only job). A client that only reads the model (`pull`,
    `save_safetensors`) needs no `init`: it attaches to the layout the pservers serve."""

    def __init__(
        self,
        masters: Masters,
        *,
        initializer: Optional[int] = None,
        job: Optional[str] = None,
        tls_ca: Optional[PathArg] = None,
        tls_cert: Optional[PathArg] = None,
        tls_key: Optional[PathArg] = None,
        token_file: Optional[PathArg] = None,
        deadline_s: Optional[float] = DEADLINE_S_DEFAULT,
    ):
        self._native = _native.PServerClient(
            master_list(masters),
            _count("initializer", initializer) if initializer is not None else random.getrandbits(63) + 1,
            job=job or "",
            tls_ca=_path(tls_ca),
            tls_cert=_path(tls_cert),
            tls_key=_path(tls_key),
            token_file=_path(token_file),
            deadline_s=deadline_s,
        )
        # Each parameter's shape, once this client offered or pulled the layout: a push of
        # another shape with the same count of values would land on the wrong elements.
        self._shapes: Dict[str, Tuple[int, ...]] = {}

    def init(
        self,
        params: Mapping[str, npt.ArrayLike],
        optimizer: str = "sgd",
        *,
        learning_rate: float = 0.01,
        block_elements: int = BLOCK_ELEMENTS_DEFAULT,
    ) -> None:
        """Waits for every pserver slot to be held, then offers the layout (names, shapes,
        `optimizer` in sgd, momentum, adam, adagrad) and initial values. The first
        initializer's values win; every other client must offer the same layout."""
        arrays = _float32(params)
        for name, array in arrays.items():
            # Refused here, before any slot is offered the layout: a pserver refuses a value
            # that is not finite, and one slot refusing while another took the layout left the
            # job's pservers serving two layouts for good.
            if not np.isfinite(array).all():
                offset = int(np.flatnonzero(~np.isfinite(array.reshape(-1)))[0])
                raise InvalidArgument(f"parameter {name!r}: element {offset} is {array.reshape(-1)[offset]} (not finite); init offers finite values only")
        tensors = [(name, list(array.shape), array.tobytes()) for name, array in arrays.items()]
        self._native.init(tensors, optimizer, float(learning_rate), _count("block_elements", block_elements))
        self._shapes = {name: array.shape for name, array in arrays.items()}

    def push(self, grads: Mapping[str, npt.ArrayLike]) -> bool:
        """Applies gradients (every parameter or some) on the pservers, at most once.

        Returns False, applying nothing, when the gradients were computed on a model that a
        restore (``raftrain job restore``) replaced since the last ``pull``: pull, and push
        what is computed on the restored model. A push before any pull is taken as is.
        """
        arrays = _float32(grads)
        for name, array in arrays.items():
            shape = self._shapes.get(name)
            if shape is not None and array.shape != shape:
                raise InvalidArgument(f"gradient {name!r}: shape {list(array.shape)}, the parameter's is {list(shape)}")
        return self._native.push([(name, array.tobytes()) for name, array in arrays.items()])

    def pull(self) -> Dict[str, np.ndarray]:
        """The whole model, each block a consistent copy, as float32 arrays of their shapes.
        A client that did not `init` takes the layout the job's pservers serve (a driver or a
        new process evaluating or exporting the model), waiting up to `deadline_s` for a
        trainer to initialize them."""
        pulled = {name: np.frombuffer(values, dtype="<f4").reshape(shape) for name, shape, values in self._native.pull()}
        self._shapes = {name: array.shape for name, array in pulled.items()}
        return pulled

    def save_safetensors(self, path: PathArg) -> Dict[str, np.ndarray]:
        """Pulls the model and writes it to `path` as safetensors (float32, the parameters'
        names and shapes; `safetensors.numpy.load_file` reads it), whole or
        not at all. Returns what it wrote."""
        tensors = self.pull()
        _write_safetensors(path, tensors)
        return tensors


def _write_safetensors(path: PathArg, tensors: Mapping[str, np.ndarray]) -> None:
    """`tensors` as a safetensors file (little-endian float32), written to a temporary file in
    the same directory, synced and renamed: whole or not at all."""
    header, offset = {}, 0
    for name, array in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}-{random.getrandbits(32):08x}.tmp")
    try:
        # Created with the umask's mode, as any saved file (mkstemp's is 0600).
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as error:
        # Named by the path asked for, not the temporary one.
        raise type(error)(error.errno, error.strerror, path) from None
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(struct.pack("<Q", len(encoded)) + encoded)
            for array in tensors.values():
                file.write(np.ascontiguousarray(array, dtype="<f4").tobytes())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
    directory_descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(directory_descriptor)
    finally:
        os.close(directory_descriptor)


def _float32(tensors: Mapping[str, npt.ArrayLike]) -> Dict[str, np.ndarray]:
    """`tensors` (NumPy arrays, torch tensors, nested lists) as C-ordered float32 arrays."""
    if not isinstance(tensors, Mapping):
        raise InvalidArgument(f"expected a dict of name -> array, got {type(tensors).__name__}")
    converted = {}
    for name, array in tensors.items():
        value: Any = array
        if hasattr(value, "detach"):  # a torch tensor
            value = value.detach().cpu().numpy()
        converted[str(name)] = np.asarray(value, dtype="<f4", order="C")
    return converted


__all__ = ["PServerClient", "BLOCK_ELEMENTS_DEFAULT"]
