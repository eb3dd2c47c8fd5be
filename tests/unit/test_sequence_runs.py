"""The runs a PostgreSQL changelog delete goes by (``gluon.capture.changelog.sequence_runs``).

A run deletes every ``gl_seq`` between its ends: a run holding one value that was not
read would delete a change that was never shipped.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from gluon.capture.changelog import sequence_runs


@settings(deadline=None)  # the first call imports pyarrow
@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=200))
def test_runs_hold_exactly_the_values(seqs: list[int]) -> None:
    runs = sequence_runs(seqs)
    assert all(high + 1 < next_low for (_, high), (next_low, _) in pairwise(runs))
    assert all(any(low <= value <= high for low, high in runs) for value in seqs)
    # Disjoint runs holding every value and no more values than there are: exactly them.
    assert sum(high - low + 1 for low, high in runs) == len(set(seqs))


@settings(deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=300), max_size=200))
def test_runs_are_the_fewest(seqs: list[int]) -> None:
    runs = sequence_runs(seqs)
    covered = [value for low, high in runs for value in range(low, high + 1)]
    assert covered == sorted(set(seqs))
    assert all(low <= high for low, high in runs)
    # Sorted, and no two runs touch: otherwise they would be one.
    assert all(high + 1 < next_low for (_, high), (next_low, _) in pairwise(runs))


def test_a_batch_of_consecutive_values_is_one_run() -> None:
    assert sequence_runs(list(range(100_000, 0, -1))) == [(1, 100_000)]
    assert sequence_runs([7, 3, 4, 4, 9, 8]) == [(3, 4), (7, 9)]
    assert sequence_runs([0, 2]) == [(0, 0), (2, 2)]  # the value between was not read
    assert sequence_runs([]) == []


def test_an_arrow_column_gives_the_runs_of_its_values() -> None:
    """An extraction passes the batch's ``gl_seq`` column as it is (chunked, maybe int32)."""
    import pyarrow as pa

    chunked = pa.chunked_array([[5, 6, 7], [9, 10], []], pa.int64())
    assert sequence_runs(chunked) == [(5, 7), (9, 10)]
    assert sequence_runs(pa.array([3, 1, 2, 2], pa.int32())) == [(1, 3)]
    assert sequence_runs(pa.chunked_array([], pa.int64())) == []
