"""`checked_batch`: a batch that an index dataset's `read(start, end)` or `read_indices(indices)`
returned, checked to hold one sample per index it was asked for. A batch of fewer or more rows
would train some of the task's samples not at all (or twice) while the masters count the task
done, silently; it is refused naming the call, the task and the rows. Imports no PyTorch: a
tensor or an array is anything with a `shape`."""

from __future__ import annotations

from typing import Callable, Iterable, List, Optional, Tuple

from .errors import DataError

#: The disagreeing elements an error names (a list of a million wrong samples names three).
WRONG_NAMED_MAX = 3


def checked_batch(batch: object, expected: int, call: Callable[[], str]) -> object:
    """`batch` as it is when it holds `expected` samples, or where its sample count cannot be
    told (a custom type; a list or tuple of `expected` elements, which may be its samples);
    else `DataError` naming the call (`call()`, e.g. `"task 3: read(30, 35)"`) and the rows of
    the first elements that disagree. Checked: a tensor or array (its first dimension), and the
    tensors and arrays of a tuple, list or dict."""
    if isinstance(batch, (tuple, list)):
        if len(batch) == expected:
            return batch
        wrong = _wrong_rows(enumerate(batch), expected)
    elif isinstance(batch, dict):
        wrong = _wrong_rows(batch.items(), expected)
    elif batch is None:
        raise DataError(f"{call()} returned None: return the batch of its {expected} samples")
    else:
        rows = _rows(batch)
        if rows is None or rows == expected:
            return batch
        raise DataError(f"{call()} returned a batch of {rows} rows for {expected} indices: {_ONE_EACH}")
    if not wrong:
        return batch
    which = ", ".join(f"element {key!r} has {rows} rows" for key, rows in wrong[:WRONG_NAMED_MAX])
    more = f" (and {len(wrong) - WRONG_NAMED_MAX} more)" if len(wrong) > WRONG_NAMED_MAX else ""
    raise DataError(f"{call()} returned a {type(batch).__name__} of {len(batch)} elements for {expected} indices, whose {which}{more}: {_ONE_EACH}")


_ONE_EACH = "a batch holds one sample per index asked for (else some of the task's samples are never trained, and the task counts done)"


def _wrong_rows(elements: Iterable[Tuple[object, object]], expected: int) -> List[Tuple[object, int]]:
    """The (key, rows) of the tensors and arrays among `elements` whose rows are not `expected`."""
    return [(key, rows) for key, value in elements if (rows := _rows(value)) is not None and rows != expected]


def _rows(value: object) -> Optional[int]:
    """The first dimension of a tensor or array (`None`: not one, or a scalar)."""
    shape = getattr(value, "shape", None)
    if shape is None:
        return None
    try:
        return int(shape[0]) if len(shape) else None
    except (TypeError, ValueError, IndexError):
        return None
