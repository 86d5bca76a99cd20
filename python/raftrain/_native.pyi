"""Types of `raftrain._native`, the Rust half of the package (src/): what the Python modules
call. Not an API of its own: use `raftrain`, `raftrain.recordio`, `raftrain.torch`.
`tests/test_package.py` checks that every name here exists in the extension and the reverse."""

from os import PathLike
from typing import List, Optional, Sequence, Tuple, Union

_Path = Union[str, PathLike]

SIGNAL_CHECK_MS: int

class Task:
    task_id: int
    dispatch: int
    pass_index: int
    chunks: List[Tuple[str, int, int, int]]
    start: Optional[int]
    end: Optional[int]
    deadline_ms: int
    shuffle_seed: Optional[int]

class StepKind:
    Task: "StepKind"
    PassOver: "StepKind"
    PassRewound: "StepKind"
    Wait: "StepKind"
    Finished: "StepKind"
    Cancelled: "StepKind"

class WalkStep:
    kind: StepKind
    task: Optional[Task]
    pass_index: int
    ended_pass: Optional[int]
    waiting_for: Optional[str]
    retry_in_s: float

class TaskClient:
    def __init__(
        self,
        masters: Sequence[str],
        name: str,
        job: str = "",
        tls_ca: Optional[_Path] = None,
        tls_cert: Optional[_Path] = None,
        tls_key: Optional[_Path] = None,
        token_file: Optional[_Path] = None,
        deadline_s: Optional[float] = None,
    ) -> None: ...
    @property
    def trainer_id(self) -> int: ...
    @property
    def pass_index(self) -> int: ...
    def checkpoint(self) -> Tuple[int, int, int]: ...
    def restore(self, checkpoint_id: int, data_only: bool = False) -> Tuple[int, int, int]: ...
    def submit_job(
        self,
        name: str,
        passes: int,
        patterns: Optional[Sequence[str]] = None,
        index: Optional[Tuple[int, int]] = None,
        chunks_per_task: Optional[int] = None,
        task_timeout_min_ms: Optional[int] = None,
        timeout_factor: Optional[int] = None,
        max_task_failures: Optional[int] = None,
        retry_failed_next_pass: Optional[bool] = None,
        shuffle_seed: Optional[int] = None,
    ) -> Tuple[int, int, int]: ...
    def report_dataset(self, job: str, patterns: Sequence[str], passes: int, shuffle_seed: Optional[int] = None) -> Tuple[int, int, int]: ...
    def report_index_dataset(self, job: str, size: int, shard_size: int, passes: int, shuffle_seed: Optional[int] = None) -> int: ...
    def step(self) -> WalkStep: ...
    def go_to(self, pass_index: int) -> None: ...
    def progress(self, task_id: int, dispatch: int) -> Optional[float]: ...
    def finish(self, task_id: int, dispatch: int) -> bool: ...
    def fail(self, task_id: int, dispatch: int, reason: str, fault: str) -> bool: ...
    def record_eval(self, pass_index: int, loss: float, accuracy: float) -> None: ...
    def status_json(self) -> str: ...
    def jobs_json(self) -> str: ...
    def cancel_job(self, job: str) -> None: ...
    def close(self) -> None: ...

class ChunkReader:
    def __init__(self, patterns: Sequence[str]) -> None: ...
    def next_chunk(self) -> Optional[List[bytes]]: ...

class ChunkWriter:
    def __init__(self, path: _Path, compressor: str = "none", max_chunk_bytes: int = ...) -> None: ...
    def write(self, record: bytes) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...

class PServerClient:
    def __init__(
        self,
        masters: Sequence[str],
        initializer: int,
        job: str = "",
        tls_ca: Optional[_Path] = None,
        tls_cert: Optional[_Path] = None,
        tls_key: Optional[_Path] = None,
        token_file: Optional[_Path] = None,
        deadline_s: Optional[float] = None,
    ) -> None: ...
    def init(
        self,
        tensors: Sequence[Tuple[str, Sequence[int], bytes]],
        optimizer: str,
        learning_rate: float,
        block_elements: int,
    ) -> None: ...
    def push(self, tensors: Sequence[Tuple[str, bytes]]) -> bool: ...
    def pull(self) -> List[Tuple[str, List[int], bytearray]]: ...

def read_task_chunk(path: _Path, offset: int, compressed_size: int, record_count: int) -> List[bytes]: ...
def encode_example(dense: bytes, sparse_index: bytes, sparse_value: bytes, label: float) -> bytes: ...
def decode_example(record: bytes) -> Tuple[bytearray, bytearray, bytearray, float]: ...
def decode_dense(records: Sequence[bytes]) -> Tuple[bytearray, bytearray, int, int]: ...
def status_json(
    masters: Sequence[str],
    job: str = "",
    tls_ca: Optional[_Path] = None,
    tls_cert: Optional[_Path] = None,
    tls_key: Optional[_Path] = None,
    token_file: Optional[_Path] = None,
    deadline_s: Optional[float] = None,
) -> str: ...
def sample_order(seed: int, pass_index: int, task_id: int, count: int) -> List[int]: ...
def before_fork() -> None: ...
def after_fork() -> None: ...
def after_fork_in_child() -> None: ...
def next_log(timeout_s: float) -> Optional[Tuple[int, str, str]]: ...
