"""The column-at-a-time half of :mod:`gluon.source.pgoutput_batch`: one relation
definition's INSERTs, UPDATEs and DELETEs walked value by value over all of their
messages at once (numpy arrays of positions, never a Python object per value), and the
values cut from the batch's buffer into Arrow string arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gluon.source.logical_values import _int64s
from gluon.source.pgoutput import BOOL_OID, ProtocolError, Relation

_NEW, _KEY, _OLD = ord("N"), ord("K"), ord("O")
_NULL, _UNCHANGED, _TEXT = ord("n"), ord("u"), ord("t")
_I, _U, _D = ord("I"), ord("U"), ord("D")
_KINDS = np.zeros(256, dtype=bool)
_KINDS[[_NULL, _UNCHANGED, _TEXT]] = True
"""The value kinds of proto v1, by byte."""

BOOLEAN_TEXTS = b"truefalse"
"""Appended after the messages: a boolean ``t``/``f`` becomes a slice of this, as the scalar
path maps it, without a value of its own."""
PADDING = 8
"""Zero bytes after everything, so a length read at a message's last byte stays in bounds
(its value is refused by the bounds check, not read past the buffer)."""


def big_endian(data: np.ndarray, positions: np.ndarray, dtype: str) -> np.ndarray:
    """The big-endian numbers of ``dtype`` at ``positions`` of ``data``, as int64."""
    width = np.dtype(dtype).itemsize
    # Every ``width`` bytes from each position, as rows of a view (no copy): one row
    # gathered per number rather than one index per byte.
    windows: np.ndarray = np.lib.stride_tricks.as_strided(
        data, shape=(len(data) - width + 1, width), strides=(1, 1), writeable=False
    )
    numbers: np.ndarray = windows[positions].view(dtype).reshape(-1)
    return numbers.astype(np.int64)


@dataclass(slots=True)
class ColumnValues:
    """A relation's changes' values: per column (relation order) each change's value's
    start and length in the batch's buffer (-1: NULL), and the UPDATEs whose unchanged
    large values no old row holds."""

    starts: list[np.ndarray]
    lengths: list[np.ndarray]
    unchanged: list[np.ndarray]
    """Per column: the UPDATEs that left its value out of the WAL."""
    unlogged: list[np.ndarray]
    """Per column: those of them whose old row does not hold it either."""
    names: list[str]
    key_changed: np.ndarray | None = None
    """Per change: an UPDATE whose old row's key differs from its new row's (shipped as a
    DELETE of the old row and an INSERT of the new, as the scalar path ships it); None: none."""
    old_starts: list[np.ndarray] = field(default_factory=list)
    """Per column, with :attr:`key_changed`: each change's old row's value (the DELETE's)."""
    old_lengths: list[np.ndarray] = field(default_factory=list)
    whole_old: np.ndarray | None = None
    """Per change, with :attr:`key_changed`: an UPDATE or DELETE that logged its whole old
    row (REPLICA IDENTITY FULL), which ``gluon.source.key_moves`` matches."""

    def column(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.starts[index], self.lengths[index]

    def old_column(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.old_starts[index], self.old_lengths[index]

    def first_unlogged(self) -> tuple[int, list[str]] | None:
        """The first change (index among the relation's) an UPDATE left a value out of,
        and every column it left out (as the scalar path names them)."""
        if not self.unlogged:
            return None
        bad = np.logical_or.reduce(self.unlogged)
        if not bad.any():
            return None
        row = int(np.argmax(bad))
        missing = [n for n, u in zip(self.names, self.unchanged, strict=True) if u[row]]
        return row, missing


class RelationChanges:
    """One relation definition's INSERTs, UPDATEs and DELETEs, read column by column."""

    def __init__(
        self,
        data: np.ndarray,
        relation: Relation,
        starts: np.ndarray,
        ends: np.ndarray,
        kinds: np.ndarray,
    ) -> None:
        """``relation``'s changes: their messages' starts, ends and kinds in ``data``
        (the batch's buffer, :data:`BOOLEAN_TEXTS` and :data:`PADDING` after it)."""
        self.data = data
        self.relation = relation
        self.starts = starts
        self.ends = ends
        self.kinds = kinds
        self.width = len(relation.columns)

    def _fail(self, rows: np.ndarray, why: str) -> None:
        if len(rows):
            kind = chr(self.kinds[rows[0]])
            raise ProtocolError(f"a truncated or malformed pgoutput {kind!r} message: {why}")

    def values(self, keys: Sequence[str] = ()) -> ColumnValues:
        """Every column's values; with ``keys``, the UPDATEs that changed one of them."""
        marker = self.data[self.starts + 5]
        is_update, is_delete = self.kinds == _U, self.kinds == _D
        has_old = (is_update | is_delete) & ((marker == _KEY) | (marker == _OLD))
        has_new = ~is_delete
        if np.any((self.kinds == _I) & (marker != _NEW)):
            raise ProtocolError("an INSERT without its new row")
        if np.any(is_delete & ~has_old):
            raise ProtocolError("a DELETE without its old row or key")
        if np.any(is_update & ~has_old & (marker != _NEW)):
            raise ProtocolError("an UPDATE without its new row")
        old_rows = np.flatnonzero(has_old)
        old_kinds, old_starts, old_lengths, old_ends = self._tuple(
            old_rows, self.starts[old_rows] + 6
        )
        new_rows = np.flatnonzero(has_new)
        new_at = self.starts[new_rows] + 6
        # An UPDATE with its old row: the new row's marker follows the old row.
        with_old = has_old[new_rows]
        after_old = old_ends[np.searchsorted(old_rows, new_rows[with_old])]
        if np.any(self.data[after_old] != _NEW):
            raise ProtocolError("an UPDATE without its new row")
        new_at[with_old] = after_old + 1
        new_kinds, new_starts, new_lengths, _ = self._tuple(new_rows, new_at)
        count = len(self.starts)
        starts, lengths, unchanged, unlogged = [], [], [], []
        for column in range(self.width):
            if not len(old_rows):  # INSERTs and UPDATEs of the same key only: no merging
                kind, start = new_kinds[column], new_starts[column]
                toast = kind == _UNCHANGED
                unchanged.append(toast)
                unlogged.append(toast)
                length = np.where(kind == _TEXT, new_lengths[column], -1)
                if self.relation.columns[column].type_oid == BOOL_OID:
                    start, length = _booleans(self.data, start, length)
                starts.append(start)
                lengths.append(length)
                continue
            kind = np.full(count, _NULL, dtype=np.uint8)
            start = np.zeros(count, dtype=np.int64)
            length = np.zeros(count, dtype=np.int64)
            old_kind = np.full(count, _NULL, dtype=np.uint8)
            old_kind[old_rows] = old_kinds[column]
            kind[old_rows], start[old_rows], length[old_rows] = (
                old_kinds[column],
                old_starts[column],
                old_lengths[column],
            )
            toast = np.zeros(count, dtype=bool)
            toast[new_rows] = new_kinds[column] == _UNCHANGED
            fresh = new_rows[new_kinds[column] != _UNCHANGED]
            fresh_in_new = new_kinds[column] != _UNCHANGED
            kind[fresh] = new_kinds[column][fresh_in_new]
            start[fresh] = new_starts[column][fresh_in_new]
            length[fresh] = new_lengths[column][fresh_in_new]
            # Unchanged in the WAL: the old row's value (already in place), if it has one.
            unchanged.append(toast)
            unlogged.append(toast & (old_kind != _TEXT))
            length = np.where(kind == _TEXT, length, -1)
            if self.relation.columns[column].type_oid == BOOL_OID:
                start, length = _booleans(self.data, start, length)
            starts.append(start)
            lengths.append(length)
        names = [column.name for column in self.relation.columns]
        found = ColumnValues(starts, lengths, unchanged, unlogged, names)
        key_changed = self._key_changed(
            keys,
            old_rows,
            new_rows,
            (old_kinds, old_starts, old_lengths),
            (new_kinds, new_starts, new_lengths),
        )
        if key_changed is not None:
            found.key_changed = key_changed
            found.whole_old = has_old & (marker == _OLD)
            for column in range(self.width):
                start = np.zeros(count, dtype=np.int64)
                length = np.full(count, -1, dtype=np.int64)
                start[old_rows] = old_starts[column]
                length[old_rows] = np.where(old_kinds[column] == _TEXT, old_lengths[column], -1)
                if self.relation.columns[column].type_oid == BOOL_OID:
                    start, length = _booleans(self.data, start, length)
                found.old_starts.append(start)
                found.old_lengths.append(length)
        return found

    def _key_changed(
        self,
        keys: Sequence[str],
        old_rows: np.ndarray,
        new_rows: np.ndarray,
        old_tuples: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]],
        new_tuples: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]],
    ) -> np.ndarray | None:
        """Per change: an UPDATE with an old row whose value of one of ``keys`` differs
        from its new row's (kind, or text compared byte for byte); None if there is none."""
        updates = old_rows[self.kinds[old_rows] == _U]
        if not keys or not len(updates):
            return None
        in_old = np.searchsorted(old_rows, updates)
        in_new = np.searchsorted(new_rows, updates)
        order = {column.name: index for index, column in enumerate(self.relation.columns)}
        changed = np.zeros(len(updates), dtype=bool)
        for key in keys:
            if key not in order:
                continue  # NULL on both sides, as the scalar path compares it
            column = order[key]
            old_kind, new_kind = old_tuples[0][column][in_old], new_tuples[0][column][in_new]
            old_length = old_tuples[2][column][in_old]
            new_length = new_tuples[2][column][in_new]
            texts = (old_kind == _TEXT) & (new_kind == _TEXT)
            changed |= (old_kind != new_kind) | (texts & (old_length != new_length))
            compared = np.flatnonzero(texts & (old_length == new_length))
            if len(compared):
                old = string_array(
                    self.data, old_tuples[1][column][in_old][compared], old_length[compared]
                )
                new = string_array(
                    self.data, new_tuples[1][column][in_new][compared], new_length[compared]
                )
                changed[compared] |= ~_booleans_of(pc.equal(old, new))
        if not changed.any():
            return None
        found = np.zeros(len(self.starts), dtype=bool)
        found[updates[changed]] = True
        return found

    def _tuple(
        self, rows: np.ndarray, at: np.ndarray
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], np.ndarray]:
        """The tuples (``TupleData``) starting at ``at`` of the messages ``rows``: per
        column each value's kind, start and length, then where each tuple ends."""
        ends = self.ends[rows]
        self._fail(rows[at + 2 > ends], "its row ends early")
        counts = big_endian(self.data, at, ">i2")
        if np.any(counts != self.width):
            wrong = int(counts[counts != self.width][0])
            raise ProtocolError(
                f"a change of {self.relation.schema}.{self.relation.name} with {wrong} "
                f"columns, where its description has {self.width}"
            )
        at = at + 2
        kinds, starts, lengths = [], [], []
        for _ in range(self.width):
            # Read past a message's end (into the next, or the padding), a value is refused
            # by the bounds check after it: the reads stay in the buffer.
            kind = self.data[at]
            unknown = np.flatnonzero(~_KINDS[kind] & (at < ends))
            if len(unknown):
                raise ProtocolError(
                    f"a column value of kind {chr(kind[unknown[0]])!r} (proto v1 has n, u, t)"
                )
            text = kind == _TEXT
            length = big_endian(self.data, at + 1, ">i4")
            length *= text
            following = at + 1 + text * (length + 4)
            self._fail(rows[(following > ends) | (length < 0)], "a value runs past its row")
            kinds.append(kind)
            starts.append(at + 5)
            lengths.append(length)
            at = following
        return kinds, starts, lengths, at


def _booleans_of(array: pa.Array) -> np.ndarray:
    """A boolean Arrow array without nulls as numpy, from its bitmap (``to_numpy`` would
    make pyarrow import pandas)."""
    bits = np.frombuffer(array.buffers()[1], dtype=np.uint8)
    unpacked = np.unpackbits(bits, bitorder="little")
    return unpacked[array.offset : array.offset + len(array)].astype(bool)


def _booleans(
    data: np.ndarray, start: np.ndarray, length: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A boolean's ``t``/``f`` as ``true``/``false`` (slices of :data:`BOOLEAN_TEXTS`)."""
    texts_at = len(data) - PADDING - len(BOOLEAN_TEXTS)
    single = length == 1
    first = data[np.where(single, start, 0)]
    true, false = single & (first == ord("t")), single & (first == ord("f"))
    start = np.where(true, texts_at, np.where(false, texts_at + 4, start))
    length = np.where(true, 4, np.where(false, 5, length))
    return start, length


def string_array(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """The slices ``starts``/``lengths`` (-1: NULL) of ``data`` as one Arrow string array.

    Raises:
        ProtocolError: a value is not UTF-8.
    """
    valid = lengths >= 0
    sizes = np.where(valid, lengths, 0)
    nulls = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    spans = _spans(data, starts, sizes)
    try:
        if spans is not None:  # every other span a value: Arrow copies them, in C++
            every_other = np.arange(0, 2 * len(sizes), 2, dtype=np.int64)
            text = pa.large_string() if pa.types.is_large_binary(spans.type) else pa.string()
            taken = spans.take(_int64s(every_other)).cast(text)
            return pa.Array.from_buffers(taken.type, len(sizes), [nulls, *taken.buffers()[1:]])
        return _gathered(data, starts, sizes, nulls)
    except pa.ArrowInvalid as exc:
        raise ProtocolError(f"a pgoutput value that is not UTF-8 text: {exc}") from None


def _spans(data: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> pa.Array | None:
    """``data`` cut at every value's start and end, as a binary array (value i is span
    2i, the bytes between values the spans between), when the values come in the buffer's
    order, as one column of a relation's changes does; else None. A NULL is an empty span
    where the previous value ended."""
    bounds = np.empty(2 * len(sizes) + 1, dtype=np.int64)
    bounds[0:-1:2], bounds[1:-1:2] = starts, starts + sizes
    bounds[0:-1:2][sizes == 0] = 0
    bounds[1:-1:2][sizes == 0] = 0
    bounds[-1] = 0
    increasing = np.maximum.accumulate(bounds)
    kept = sizes > 0
    if not np.array_equal(increasing[0:-1:2][kept], starts[kept]):
        return None  # a boolean's text, or an old row's value after a later one
    buffer = pa.py_buffer(data)
    if len(data) >= 1 << 31:
        return pa.Array.from_buffers(
            pa.large_binary(), len(bounds) - 1, [None, pa.py_buffer(increasing), buffer]
        )
    offsets = pa.py_buffer(increasing.astype(np.int32))
    return pa.Array.from_buffers(pa.binary(), len(bounds) - 1, [None, offsets, buffer])


def _gathered(
    data: np.ndarray, starts: np.ndarray, sizes: np.ndarray, nulls: pa.Buffer | None
) -> pa.Array:
    """The values cut by numpy, byte by byte (values out of the buffer's order)."""
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    # Byte i of the result is data[start of its value + (i - where that value begins)].
    gather = np.repeat(starts - offsets[:-1], sizes) + np.arange(total, dtype=np.int64)
    values = pa.py_buffer(data[gather].tobytes())
    if total >= 1 << 31:
        array = pa.Array.from_buffers(
            pa.large_string(), len(sizes), [nulls, pa.py_buffer(offsets), values]
        )
    else:
        offsets32 = pa.py_buffer(offsets.astype(np.int32))
        array = pa.Array.from_buffers(pa.string(), len(sizes), [nulls, offsets32, values])
    array.validate(full=True)
    return array
