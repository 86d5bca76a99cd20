"""`Example`: the record of raftrain's RecordIO datasets (`raftrain.example.v1.Example`), with
its fields as NumPy arrays. Encoding and decoding run in Rust (prost); Python does no work per
element."""

from __future__ import annotations

from typing import Iterable, Optional, Tuple

import numpy as np
import numpy.typing as npt

from . import _native
from .errors import InvalidArgument


class Example:
    """One training example: dense features, sparse (index, value) pairs, and a label."""

    __slots__ = ("dense", "sparse_index", "sparse_value", "label")

    def __init__(
        self,
        dense: Optional[npt.ArrayLike] = None,
        sparse_index: Optional[npt.ArrayLike] = None,
        sparse_value: Optional[npt.ArrayLike] = None,
        label: float = 0.0,
    ):
        self.dense: np.ndarray = _array(dense, "<f4")
        self.sparse_index: np.ndarray = _array(sparse_index, "<u4")
        self.sparse_value: np.ndarray = _array(sparse_value, "<f4")
        self.label: float = float(label)

    def encode(self) -> bytes:
        """The protobuf bytes, as one RecordIO record holds them."""
        return _native.encode_example(
            self.dense.tobytes(), self.sparse_index.tobytes(), self.sparse_value.tobytes(), self.label
        )

    @classmethod
    def decode(cls, record: bytes) -> "Example":
        """Decodes a record; `raftrain.DataError` if it is not an Example."""
        dense, sparse_index, sparse_value, label = _native.decode_example(record)
        example = cls.__new__(cls)
        example.dense = np.frombuffer(dense, dtype="<f4")
        example.sparse_index = np.frombuffer(sparse_index, dtype="<u4")
        example.sparse_value = np.frombuffer(sparse_value, dtype="<f4")
        example.label = float(label)
        return example

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Example):
            return NotImplemented
        return (
            np.array_equal(self.dense, other.dense)
            and np.array_equal(self.sparse_index, other.sparse_index)
            and np.array_equal(self.sparse_value, other.sparse_value)
            and self.label == other.label
        )

    def __repr__(self) -> str:
        return (
            f"Example(dense={self.dense!r}, sparse_index={self.sparse_index!r}, "
            f"sparse_value={self.sparse_value!r}, label={self.label!r})"
        )


def decode_dense(records: Iterable[bytes]) -> Tuple[np.ndarray, np.ndarray]:
    """Dense Examples as a float32 matrix (one row each) and a float32 label vector."""
    features, labels, rows, columns = _native.decode_dense(list(records))
    matrix = np.frombuffer(features, dtype="<f4").reshape(rows, columns)
    return matrix, np.frombuffer(labels, dtype="<f4")


def _array(values: Optional[object], dtype: str) -> np.ndarray:
    if values is None:
        return np.zeros(0, dtype=dtype)
    array = np.ascontiguousarray(values, dtype=dtype)
    if array.ndim != 1:
        raise InvalidArgument(f"an Example field is one-dimensional, not of shape {array.shape}")
    return array
