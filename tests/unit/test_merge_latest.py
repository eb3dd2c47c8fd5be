"""``latest_per_key``: which change of each key an IMMEDIATE merge applies.

Compared on random batches (NULL keys, composite keys, several chunks) with the
plain definition: walk the changes by ``gl_seq`` descending, the first of each key wins.
"""

from __future__ import annotations

import decimal
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from gluon.lake.merge import latest_per_key

KEY_TYPES = {"i": pa.int64(), "s": pa.string(), "d": pa.decimal128(5, 2)}
KEY_VALUES = {
    "i": st.integers(0, 3),
    "s": st.sampled_from("abc"),
    "d": st.sampled_from([decimal.Decimal("0.25"), decimal.Decimal("1.00")]),
}


def reference(rows: list[dict[str, Any]], keys: list[str]) -> list[bool]:
    seen: set[tuple[Any, ...]] = set()
    latest = [False] * len(rows)
    for index in sorted(range(len(rows)), key=lambda i: -rows[i]["gl_seq"]):
        key = tuple(rows[index][name] for name in keys)
        if key not in seen:
            seen.add(key)
            latest[index] = True
    return latest


@st.composite
def batches(draw: st.DrawFn) -> tuple[pa.Table, list[str]]:
    kinds = draw(st.lists(st.sampled_from(sorted(KEY_TYPES)), min_size=1, max_size=3, unique=True))
    count = draw(st.integers(0, 30))
    seqs = draw(st.lists(st.integers(0, 10_000), min_size=count, max_size=count, unique=True))
    columns = {
        f"k{kind}": pa.array(
            draw(st.lists(st.none() | KEY_VALUES[kind], min_size=count, max_size=count)),
            KEY_TYPES[kind],
        )
        for kind in kinds
    }
    table = pa.table({**columns, "gl_seq": pa.array(seqs, pa.int64())})
    cut = draw(st.integers(0, count))
    table = pa.concat_tables([table.slice(0, cut), table.slice(cut)])  # two chunks
    return table, list(columns)


@settings(max_examples=200, deadline=None)
@given(batches())
def test_latest_per_key_is_the_highest_seq_of_each_key(batch: tuple[pa.Table, list[str]]) -> None:
    table, keys = batch
    assert latest_per_key(table, keys).to_pylist() == reference(table.to_pylist(), keys)


def test_a_tie_on_gl_seq_goes_to_the_later_extraction() -> None:
    """ORA_ROWSCN ships a row again at the SCN it had (a re-run, or every row read again after
    an ADD COLUMN): as in the merging view, the later run's image is the latest."""
    changes = pa.table(
        {
            "id": pa.array([1, 1, 2], pa.int64()),
            "note": pa.array([None, "preset", None], pa.string()),
            "gl_seq": pa.array([7, 7, 5], pa.int64()),
            "gl_extraction_id": pa.array([3, 4, 3], pa.int64()),
        }
    )
    assert latest_per_key(changes, ["id"]).to_pylist() == [False, True, True]
