"""RecordIO files on the Rust reader and writer: byte-compatible with PaddlePaddle's format and
with `raftrain recordio` (the same code). Every chunk read is CRC-checked; a bad one raises
`raftrain.DataError` naming the file and byte offset."""

from __future__ import annotations

import os
from types import TracebackType
from typing import Iterator, List, Literal, Optional, Sequence, Type, Union

from . import _native
from .task_client import _patterns

#: A new chunk starts once the uncompressed chunk would pass this many bytes: 1 MiB, a few
#: thousand dense examples, so that a chunk (a task, by default) takes seconds to train on
#: (`raftrain recordio write`'s default too).
MAX_CHUNK_BYTES_DEFAULT = 1 << 20

#: One path or glob, or several.
Patterns = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]


class Reader:
    """Every record of one or more files (paths or globs, in `raftrain recordio cat`'s order),
    as `bytes`. Patterns are expanded when the reader is made: one that matches nothing fails
    then."""

    def __init__(self, path_or_glob: Patterns):
        self._chunks = _native.ChunkReader(_patterns(path_or_glob))
        self._pending: List[bytes] = []
        self._next = 0

    def chunks(self) -> Iterator[List[bytes]]:
        """The remaining records a chunk at a time (the fast way to read)."""
        if self._next < len(self._pending):
            rest, self._pending = self._pending[self._next :], []
            yield rest
        while True:
            chunk = self._chunks.next_chunk()
            if chunk is None:
                return
            yield chunk

    def __iter__(self) -> "Reader":
        return self

    def __next__(self) -> bytes:
        while self._next >= len(self._pending):
            chunk = self._chunks.next_chunk()
            if chunk is None:
                raise StopIteration
            self._pending, self._next = chunk, 0
        record = self._pending[self._next]
        self._next += 1
        return record


class Writer:
    """Writes records into a new RecordIO file that appears, whole, only at `close()` (written
    under a temporary name of its own, `<path>.<pid>-<n>.tmp`, fsynced, renamed: two writers of
    one path each write theirs whole, and the one closed last stays). As a context manager it
    closes on a normal exit and leaves no file when the block raises."""

    def __init__(self, path: Union[str, "os.PathLike[str]"], compressor: str = "none", *, max_chunk_bytes: int = MAX_CHUNK_BYTES_DEFAULT):
        self.path: str = os.fspath(path)
        self._native = _native.ChunkWriter(self.path, compressor, max_chunk_bytes)
        self.records_written: int = 0

    def write(self, record: bytes) -> None:
        self._native.write(record)
        self.records_written += 1

    def close(self) -> None:
        self._native.close()

    def abort(self) -> None:
        """Drops everything written: no file appears."""
        self._native.abort()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], traceback: Optional[TracebackType]) -> Literal[False]:
        if exc is None:
            self.close()
        else:
            self.abort()
        return False
