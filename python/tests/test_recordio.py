"""RecordIO and Example from Python are the Rust format: files written here are read by
`raftrain recordio cat` and the other way round, every compressor; bad bytes raise
`raftrain.DataError` naming the file and offset; a writer leaves no file when it fails."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import raftrain
from raftrain.recordio import Reader, Writer

from cluster import run_tool


@pytest.mark.parametrize("compressor", ["none", "snappy", "gzip"])
def test_python_writes_what_the_rust_reader_reads(tmp_path, compressor):
    """Records written by `raftrain.recordio.Writer` come back, in order, from
    `raftrain recordio cat --hex`, across several chunks."""
    path = tmp_path / "out.recordio"
    records = [f"record {index}".encode() * (index % 7 + 1) for index in range(500)]
    with Writer(path, compressor, max_chunk_bytes=1000) as writer:
        for record in records:
            writer.write(record)
    printed = run_tool("recordio", "cat", "--hex", str(path)).decode().split()
    assert [bytes.fromhex(line) for line in printed] == records
    index = run_tool("recordio", "index", str(path)).decode()
    assert compressor in index


@pytest.mark.parametrize("compressor", ["none", "snappy", "gzip"])
def test_rust_writes_what_the_python_reader_reads(tmp_path, compressor):
    """Records written by `raftrain recordio write` come back from `Reader`, one at a time and
    a chunk at a time, including an empty record."""
    path = tmp_path / "in.recordio"
    records = [b"", b"\x00\x01binary\xff"] + [f"line {index}".encode() for index in range(300)]
    lines = "".join(record.hex() + "\n" for record in records).encode()
    run_tool("recordio", "write", "--out", str(path), "--compressor", compressor, "--max-chunk-bytes", "256", input=lines)
    assert list(Reader(path)) == records
    chunks = list(Reader(str(path)).chunks())
    assert len(chunks) > 1 and [record for chunk in chunks for record in chunk] == records


def test_globs_read_files_in_sorted_order(tmp_path):
    """A glob reads its files in sorted order, as the master and `recordio cat` do."""
    for name in ["b", "a", "c"]:
        with Writer(tmp_path / f"part-{name}.recordio") as writer:
            writer.write(name.encode())
    assert list(Reader(str(tmp_path / "part-*.recordio"))) == [b"a", b"b", b"c"]
    assert list(Reader([tmp_path / "part-c.recordio", tmp_path / "part-a.recordio"])) == [b"c", b"a"]


def test_examples_round_trip_and_match_the_rust_decoder(tmp_path):
    """An Example encoded here decodes to the same arrays, and `recordio cat --example` (the
    Rust decoder) prints the same values."""
    example = raftrain.Example(dense=[1.5, -2.0, 3.25], sparse_index=[1, 7], sparse_value=[0.5, 4.0], label=2.0)
    decoded = raftrain.Example.decode(example.encode())
    assert decoded == example
    assert decoded.dense.dtype == np.float32 and decoded.sparse_index.dtype == np.uint32
    path = tmp_path / "examples.recordio"
    with Writer(path) as writer:
        writer.write(example.encode())
    printed = run_tool("recordio", "cat", "--example", str(path)).decode()
    for value in ["1.5", "-2", "3.25", "0.5", "4"]:
        assert value in printed, printed


def test_corrupt_chunks_raise_data_errors_naming_file_and_offset(tmp_path):
    """A flipped payload byte fails the CRC check: `DataError` with the file and offset, the
    data's fault; a pattern that matches nothing is this process's fault ("local")."""
    path = tmp_path / "corrupt.recordio"
    with Writer(path, max_chunk_bytes=100) as writer:
        for index in range(50):
            writer.write(b"x" * 40 + bytes([index]))
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(raftrain.DataError) as raised:
        list(Reader(path))
    assert str(path) in raised.value.message and "CRC" in raised.value.message
    assert raised.value.fault == "content" and raised.value.code == "DATA_LOSS"
    with pytest.raises(raftrain.DataError) as missing:
        Reader(tmp_path / "nothing-*.recordio")
    assert missing.value.fault == "local"
    with pytest.raises(raftrain.DataError, match="is a directory: name its files") as directory:
        Reader(tmp_path)
    assert directory.value.fault == "local"


def test_a_failed_writer_leaves_no_file(tmp_path):
    """The file appears only when the writer closes; a block that raises leaves nothing."""
    path = tmp_path / "never.recordio"
    with pytest.raises(RuntimeError):
        with Writer(path) as writer:
            writer.write(b"one")
            assert not path.exists(), "the file appears only at close"
            raise RuntimeError("stop")
    assert not path.exists() and not list(tmp_path.iterdir())
    with pytest.raises(raftrain.InvalidArgument):
        Writer(path, "zstd")
    closed = Writer(path)
    closed.close()
    with pytest.raises(raftrain.FailedPrecondition):
        closed.write(b"late")


def test_bad_example_input_is_refused(tmp_path):
    """Fields of the wrong shape, unequal sparse arrays and non-Example bytes are refused with
    clear exceptions."""
    with pytest.raises(raftrain.InvalidArgument):
        raftrain.Example(dense=[[1.0, 2.0]])
    with pytest.raises(raftrain.InvalidArgument, match="parallel"):
        raftrain.Example(sparse_index=[1, 2], sparse_value=[1.0]).encode()
    with pytest.raises(raftrain.DataError):
        raftrain.Example.decode(b"\xff\xff\xff")


def test_one_reader_read_by_two_threads_finishes(tmp_path):
    """Two threads reading chunks of one `Reader` both finish and between them read every
    record once. They run in a child interpreter with a timeout: the deadlock this guards
    against (one thread waiting for the reader's lock while holding the GIL, the other
    holding the lock and waiting for the GIL) hangs the whole interpreter."""
    path = tmp_path / "shared.recordio"
    count = 20_000
    with Writer(path, "gzip", max_chunk_bytes=2048) as writer:
        for index in range(count):
            writer.write(f"record {index} ".encode() * 8)
    script = (
        "import sys, threading\n"
        "from raftrain.recordio import Reader\n"
        "reader = Reader(sys.argv[1])\n"
        "counts = []\n"
        "def read():\n"
        "    counts.append(sum(len(chunk) for chunk in reader.chunks()))\n"
        "threads = [threading.Thread(target=read) for _ in range(2)]\n"
        "[thread.start() for thread in threads]\n"
        "[thread.join() for thread in threads]\n"
        "print(sum(counts))\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("two threads reading one Reader deadlocked (no answer within 60 s)")
    assert done.returncode == 0, done.stderr.decode()
    assert int(done.stdout) == count


@pytest.mark.parametrize("kind", ["symlink", "dangling symlink", "directory", "fifo"])
def test_a_writer_replaces_only_a_regular_file(tmp_path, kind):
    """`Writer` refuses a path where something other than a regular file is (a symbolic link,
    even to a regular file, a directory, a fifo), naming the path, and leaves it as it was;
    `raftrain recordio write --out` refuses it alike. (A device is left to the Rust test,
    which does not write: before the check, a writer would have replaced it.)"""
    aimed = tmp_path / "aimed"
    aimed.write_bytes(b"kept")
    path = tmp_path / "target.recordio"
    if kind == "symlink":
        path.symlink_to(aimed)
    elif kind == "dangling symlink":
        path.symlink_to(tmp_path / "nowhere")
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    with pytest.raises(raftrain.Error, match=str(path)):
        with Writer(path) as writer:
            writer.write(b"record")
    with pytest.raises(AssertionError, match=f"{path}: a .* is there"):
        run_tool("recordio", "write", "--out", str(path), input=b"00\n")
    assert aimed.read_bytes() == b"kept"
    assert kind != "symlink" or path.is_symlink()


def test_two_writers_of_one_path_each_write_theirs_whole(tmp_path):
    """Each writer writes under a temporary name of its own: both close, and the file holds the
    one closed last, whole (the second used to remove the first's temporary file, so the first
    close published the second's records and the second failed)."""
    path = tmp_path / "same.rio"
    first, second = Writer(path), Writer(path)
    for index in range(100):
        first.write(f"one-{index}".encode())
    for index in range(3):
        second.write(f"two-{index}".encode())
    first.close()
    assert len(list(Reader(path))) == 100
    second.close()
    assert list(Reader(path)) == [b"two-0", b"two-1", b"two-2"]
    assert sorted(entry.name for entry in tmp_path.iterdir()) == ["same.rio"], "no temporary file left"


def test_a_path_no_writer_can_use_is_an_invalid_argument(tmp_path):
    (tmp_path / "dir").mkdir()
    for path in (tmp_path / "dir", tmp_path / "missing" / "x.rio"):
        with pytest.raises(raftrain.InvalidArgument, match=str(path.parent if path.name == "x.rio" else path)):
            Writer(path)
