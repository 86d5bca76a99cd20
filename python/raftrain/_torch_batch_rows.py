"""`checked_batch`: a batch that an index dataset's `read(start, end)` or `read_indices(indices)`
returned, checked to hold one sample per index it was asked for. A batch of fewer or more rows
would train some of the task's samples not at all (or twice) while the masters count the task
done, silently; it is refused naming the call, the task and the rows. Imports no PyTorch: a
tensor or an array is anything with a `shape`."""

from __future__ import annotations

from typing import Callable, Optional

from .errors import DataError


def checked_batch(batch: object, expected: int, call: Callable[[], str]) -> object:
    """`batch` as it is when it holds `expected` samples, or where its sample count cannot be
    told (a custom type; a list or tuple of `expected` samples); else `DataError` naming
    the call (`call()`, e.g. `"task 3: read(30, 35)"`) and each element's rows. Checked: a tensor or array
    (its first dimension), and the tensors and arrays in a tuple, list or dict."""
    if type(batch) is tuple:
        # The usual batch, `(features, labels)`: checked without building anything.
        for value in batch:
            shape = getattr(value, "shape", None)
            if shape is not None and len(shape) and shape[0] != expected:
                break
        else:
            return batch
    if batch is None:
        raise DataError(f"{call()} returned None: return the batch of its {expected} samples")
    rows = _rows(batch)
    if rows is not None:
        if rows != expected:
            raise DataError(f"{call()} returned a batch of {rows} rows for {expected} indices: {_ONE_EACH}")
        return batch
    if isinstance(batch, dict):
        elements = list(batch.items())
    elif isinstance(batch, (tuple, list)):
        elements = list(enumerate(batch))
    else:
        return batch
    wrong = [(key, rows) for key, rows in ((key, _rows(value)) for key, value in elements) if rows is not None and rows != expected]
    if not wrong or (isinstance(batch, (tuple, list)) and len(batch) == expected):
        # (A list or tuple as long as the range holds one sample per index.)
        return batch
    which = ", ".join(f"element {key!r} has {rows} rows" for key, rows in wrong)
    raise DataError(f"{call()} returned a batch for {expected} indices whose {which}: {_ONE_EACH}")


_ONE_EACH = "a batch holds one sample per index asked for (else some of the task's samples are never trained, and the task counts done)"


def _rows(value: object) -> Optional[int]:
    """The first dimension of a tensor or array (`None`: not one, or a scalar)."""
    shape = getattr(value, "shape", None)
    if shape is None:
        return None
    try:
        return int(shape[0]) if len(shape) else None
    except (TypeError, ValueError, IndexError):
        return None
