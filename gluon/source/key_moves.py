"""The net change per key of one transaction that moved rows between keys of a table
whose replica identity is FULL without an immediate unique index on its key.

A key-changing UPDATE is shipped as a DELETE of the old key and a write of the new; applied
by key in order, the DELETE of a key another row of the same transaction has just moved
onto wipes that row (``UPDATE t SET id = id + 1`` leaves one row of three). Such a
transaction's changes are replaced by their net effect per key: what each key holds at
commit, matched by the FULL old images (identical images are interchangeable, so the match
is exact). Nothing else needs it: with an immediate unique key no two rows share a key at
any moment.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

Row = TypeVar("Row", bound=Sequence[object])

WRITE, VACATE = "W", "V"
"""An image written into a key (INSERT, an UPDATE's new row); an image leaving a key
(DELETE, an UPDATE's old row: an UPDATE in place is a vacate then a write of its key)."""


class KeyNotUniqueError(ValueError):
    """One transaction left two rows under one key: the key is not unique."""

    def __init__(self, key: Sequence[object]) -> None:
        self.key = tuple(key)
        values = ", ".join("NULL" if value is None else str(value) for value in self.key)
        super().__init__(f"one transaction left more than one row under the key ({values})")


@dataclass(slots=True)
class _Key:
    written: dict[Hashable, list[int]] = field(default_factory=dict)
    """The images this transaction wrote into the key and still there: image -> the
    events that wrote them (a multiset)."""
    vacated_by: int | None = None
    """The event that vacated the row the key held before the transaction."""


def net_changes(events: Sequence[tuple[str, Hashable, Hashable]]) -> list[tuple[int, str]]:
    """The changes to ship for one transaction's ``events`` (kind, key, image), in order: per
    key touched, at most one (event index, gl_op): ``I`` the image the key holds at commit
    (its write event), ``D`` the key emptied (the vacate of the row it held before).

    Raises:
        KeyNotUniqueError: a key holds more than one row at commit.
    """
    keys: dict[Hashable, _Key] = {}
    for at, (kind, key, image) in enumerate(events):
        held = keys.setdefault(key, _Key())
        if kind == WRITE:
            held.written.setdefault(image, []).append(at)
            continue
        writes = held.written.get(image)
        if writes:
            writes.pop()  # a row this transaction put there leaves again
            if not writes:
                del held.written[image]
        elif held.vacated_by is None:
            held.vacated_by = at  # the row the key held before the transaction
    shipped: list[tuple[int, str]] = []
    for key, held in keys.items():
        remaining = [at for writes in held.written.values() for at in writes]
        if len(remaining) > 1:
            raise KeyNotUniqueError(key if isinstance(key, tuple) else (key,))
        if remaining:
            shipped.append((remaining[0], "I"))
        elif held.vacated_by is not None:
            shipped.append((held.vacated_by, "D"))
    return sorted(shipped)


def refusal(key_columns: Sequence[str], error: KeyNotUniqueError) -> str:
    """What is wrong and how to fix it, for ``error`` (the caller names the table and adds
    how to rebuild it)."""
    values = ", ".join("NULL" if value is None else str(value) for value in error.key)
    return (
        f"one transaction left more than one row under the key ({', '.join(key_columns)}) = "
        f"({values}): the key is not unique, which PG_LOGICAL needs; nothing was shipped: "
        "make the key columns unique in the source (or name unique ones with "
        "--incremental-key-columns), then"
    )


def net_rows(
    ops: Sequence[str],
    rows: Sequence[Row],
    olds: dict[int, Row],
    keys_at: Sequence[int],
    image_of: Callable[[Row], tuple[object, ...]] = tuple,
) -> tuple[list[str], list[Row]] | None:
    """One transaction's changes of a table (``gl_op``, its row), the whole old rows of its
    UPDATEs in place in ``olds`` (by position), as their net change per key (``image_of``:
    a row's values as compared, one spelling per value; ``keys_at``: where the key's are
    among them). None: a change cannot be matched (a TRUNCATE, an UPDATE without its old
    row).

    Raises:
        KeyNotUniqueError: a key holds more than one row when the transaction commits.
    """
    events: list[tuple[str, Hashable, Hashable]] = []
    steps: list[Row] = []
    for at, (op, row) in enumerate(zip(ops, rows, strict=True)):
        if op == "U" and at in olds:
            moves = [(VACATE, olds[at]), (WRITE, row)]
        elif op in ("I", "D"):
            moves = [(WRITE if op == "I" else VACATE, row)]
        else:
            return None
        for kind, row in moves:
            image = image_of(row)
            events.append((kind, tuple(image[i] for i in keys_at), image))
            steps.append(row)
    shipped = net_changes(events)
    return [op for _, op in shipped], [steps[at] for at, _ in shipped]


def netted(
    data: np.ndarray,
    kinds: np.ndarray,
    transactions: np.ndarray,
    values: tuple[np.ndarray, np.ndarray, np.ndarray],
    moved: np.ndarray,
    keys_at: Sequence[int],
) -> tuple[np.ndarray, np.ndarray]:
    """A pgoutput batch's changes of a table (``kinds``: the bytes ``I``/``D``/``U``/``T``;
    ``values``: per column the starts, lengths and absence of each change's text in
    ``data``) with those of the transactions ``moved`` (only INSERTs and DELETEs, each
    UPDATE already a DELETE of its whole old row and an INSERT of its new) replaced by their
    net change per key: the changes kept (indices) and their kinds.

    Raises:
        KeyNotUniqueError: a key holds more than one row when a transaction commits.
    """
    import numpy as np

    from gluon.source.pgoutput_columns import string_array

    starts, lengths, absent = values
    rows = np.flatnonzero(np.isin(transactions, moved))
    texts = [
        string_array(data, starts[c, rows], lengths[c, rows]).to_pylist()
        for c in range(len(starts))
    ]
    images = list(zip(*texts, *absent[:, rows].tolist(), strict=True))
    written = ord("I")
    out = kinds.copy()
    keep = np.ones(len(kinds), dtype=bool)
    keep[rows] = False
    cuts = np.flatnonzero(np.diff(transactions[rows])) + 1
    for run in np.split(np.arange(len(rows)), cuts):
        events = [
            (
                WRITE if kinds[rows[at]] == written else VACATE,
                tuple(images[at][c] for c in keys_at),
                images[at],
            )
            for at in run
        ]
        for at, op in net_changes(events):
            row = rows[run[at]]
            keep[row] = True
            out[row] = ord(op)
    return np.flatnonzero(keep), out[keep]


def op_texts(kinds: np.ndarray) -> pa.Array:
    """``gl_op`` as Arrow strings of one character: the bytes ``kinds``, without a copy."""
    import numpy as np
    import pyarrow as pa

    offsets = np.arange(len(kinds) + 1, dtype=np.int32)
    return pa.Array.from_buffers(
        pa.string(), len(kinds), [None, pa.py_buffer(offsets), pa.py_buffer(kinds)]
    )
