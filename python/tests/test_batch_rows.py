"""`raftrain._torch_batch_rows.checked_batch` on the batches a `read` may return (no masters:
`test_torch.py` runs it through a loader against real ones)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from raftrain import DataError
from raftrain._torch_batch_rows import checked_batch


def call() -> str:
    return "task 3: read(30, 35)"


@pytest.mark.parametrize(
    "batch",
    [
        (torch.zeros(5, 4), torch.zeros(5)),
        [torch.zeros(5, 4), torch.zeros(5)],
        {"x": np.zeros((5, 4)), "y": np.zeros(5), "name": "blobs"},
        torch.zeros(5, 4),
        [(index, index % 3) for index in range(5)],
        [torch.zeros(8) for _ in range(5)],
        (torch.zeros(5), 7, "text", torch.tensor(1.0)),
        "a custom batch",
    ],
)
def test_a_batch_of_one_sample_per_index_passes_as_it_is(batch):
    assert checked_batch(batch, 5, call) is batch


@pytest.mark.parametrize(
    "batch, said",
    [
        ((torch.zeros(4, 4), torch.zeros(4)), r"returned a tuple of 2 elements for 5 indices, whose element 0 has 4 rows, element 1 has 4 rows:"),
        ((torch.zeros(5, 4), torch.zeros(4)), r"returned a tuple of 2 elements for 5 indices, whose element 1 has 4 rows:"),
        ({"x": torch.zeros(5, 4), "y": np.zeros(6)}, r"returned a dict of 2 elements for 5 indices, whose element 'y' has 6 rows:"),
        (np.zeros((4, 2)), r"returned a batch of 4 rows for 5 indices:"),
        (None, r"returned None: return the batch of its 5 samples"),
        ([torch.zeros(8)] * 1000, r"returned a list of 1000 elements for 5 indices, whose element 0 has 8 rows, element 1 has 8 rows, element 2 has 8 rows \(and 997 more\):"),
    ],
)
def test_a_batch_of_other_rows_is_refused_naming_the_call_and_the_rows(batch, said):
    with pytest.raises(DataError, match=r"^DATA_LOSS: task 3: read\(30, 35\) " + said):
        checked_batch(batch, 5, call)


def test_a_shape_that_is_no_sequence_is_not_counted():
    class Odd:
        shape = 3

    batch = (Odd(), torch.zeros(5))
    assert checked_batch(batch, 5, call) is batch
