"""A batch of pgoutput protocol v1 messages decoded straight into Arrow (issue 33, item 2).

What :func:`gluon.source.pgoutput.transactions` and :func:`~gluon.source.pgoutput.table_rows`
give, one message and one value at a time in Python, this gives column at a time: the
messages' kinds, transactions and relation ids are read with numpy over the whole batch;
the rare messages (a relation's description, a TRUNCATE, a type) go through the scalar
decoder; then, for one relation definition at a time, each column of every INSERT, UPDATE
and DELETE is walked over all of its messages at once (a position per message: the kind
byte ``n``/``u``/``t``, a big-endian length, the value's bytes), and each of the table's
columns becomes one Arrow string array cut from the slot's own buffer by offsets. No
Python object per change or per value.

The result is the same text, in the same order, with the same errors, as the scalar path
(``tests/integration/test_pgoutput_batch.py`` compares them on real slots), ready for
``gluon.source.logical_values``' typing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from gluon.schema import TableSpec
from gluon.source.logical_values import _int64s, _typed
from gluon.source.pgoutput import (
    BOOL_OID,
    ProtocolError,
    Relation,
    Truncate,
    UnloggedValueError,
    decode,
)

_B, _C, _I, _U, _D, _T = (ord(kind) for kind in "BCIUDT")
_NEW, _KEY, _OLD = ord("N"), ord("K"), ord("O")
_NULL, _UNCHANGED, _TEXT = ord("n"), ord("u"), ord("t")
_CHANGES = np.array([_I, _U, _D], dtype=np.uint8)
_BEGIN_SIZE, _COMMIT_SIZE = 21, 26
"""``B`` final LSN, timestamp, xid; ``C`` flags, commit LSN, end LSN, timestamp."""

_BOOLEAN_TEXTS = b"truefalse"
"""Appended after the messages: a boolean ``t``/``f`` becomes a slice of this, as the scalar
path maps it, without a value of its own."""
_PADDING = 8
"""Zero bytes after everything, so a length read at a message's last byte stays in bounds
(its value is refused by the bounds check, not read past the buffer)."""


@dataclass(frozen=True, slots=True)
class TableChanges:
    """One table's changes in a batch's whole transactions, in the slot's order."""

    ops: pa.Array
    """``gl_op`` of each change: I, U, D, or T (a TRUNCATE, every column NULL)."""
    columns: list[pa.Array]
    """The values as text (Arrow strings), one array per name asked for, in that order."""
    transactions: np.ndarray
    """Each change's transaction (an index into :attr:`Batch.commit_lsns`)."""
    positions: np.ndarray
    """Each change's position among this table's changes in its transaction."""

    def __len__(self) -> int:
        return len(self.ops)

    def as_arrow(self, seqs: pa.Array, spec: TableSpec, schema: pa.Schema) -> pa.Table:
        """The changes in ``schema``'s types (the lake's columns, ``gl_seq`` = ``seqs``,
        ``gl_op``), typed as the test_decoding path types them.

        Raises:
            UnfitValueError: a value does not fit its column's lake type.
            SourceError: a bytea value is in neither of PostgreSQL's text forms.
        """
        if not len(self):
            return schema.empty_table()
        return _typed(self.columns, seqs, self.ops, spec, schema)


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch of a slot's messages, framed: what :meth:`table` reads columns from."""

    data: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    kinds: np.ndarray
    transaction: np.ndarray
    """Per message: its whole transaction's index, or -1 (outside one, or in the last one
    when the batch ends before its COMMIT: a later peek reads it whole)."""
    commit_lsns: np.ndarray
    end_lsns: np.ndarray
    xids: np.ndarray
    relation_ids: np.ndarray
    """Per message: the relation of an INSERT, UPDATE or DELETE, else 0."""
    descriptions: list[tuple[int, Relation]]
    """Each Relation message of the batch (message index, relation), in order."""
    truncates: list[tuple[int, Truncate]]
    initial: dict[int, Relation]
    """The relations known before the batch's first message."""

    def table(self, tables: set[int], names: list[str]) -> TableChanges:
        """The changes of the relations ``tables`` (a table's oid, or its root's with
        ``publish_via_partition_root``), values in the order of ``names`` (a column the
        relation lacks is NULL; a DELETE or a key-only old row has its key, the rest NULL).

        Raises:
            UnloggedValueError: an UPDATE left a large value out and no old row holds it.
            ProtocolError: a change is malformed, or names a relation never described.
        """
        whole = self.transaction >= 0
        changed = np.flatnonzero(whole & np.isin(self.relation_ids, list(tables)))
        truncated = [
            at
            for at, truncate in self.truncates
            if self.transaction[at] >= 0 and not tables.isdisjoint(truncate.relations)
        ]
        rows = changed
        if truncated:  # rare: a sort only then (np.union1d hashes a million rows)
            rows = np.sort(np.concatenate([changed, np.array(truncated, dtype=np.int64)]))
        starts = np.zeros((len(names), len(rows)), dtype=np.int64)
        lengths = np.full((len(names), len(rows)), -1, dtype=np.int64)
        unlogged: tuple[int, list[str]] | None = None
        for relation, messages in self._versions(changed, tables):
            at = np.searchsorted(rows, messages)
            values = _Walk(self, relation, messages).values()
            order = {column.name: index for index, column in enumerate(relation.columns)}
            for slot, name in enumerate(names):
                if name in order:
                    starts[slot, at], lengths[slot, at] = values.column(order[name])
            first = values.first_unlogged()
            if first is not None and (unlogged is None or messages[first[0]] < unlogged[0]):
                unlogged = (int(messages[first[0]]), first[1])
        if unlogged is not None:
            raise UnloggedValueError(unlogged[1])
        transactions = self.transaction[rows]
        first_of_transaction = np.searchsorted(transactions, transactions, side="left")
        return TableChanges(
            ops=_string_array(self.data, self.starts[rows], np.ones_like(rows)),  # kind = gl_op
            columns=[_string_array(self.data, s, n) for s, n in zip(starts, lengths, strict=True)],
            transactions=transactions,
            positions=np.arange(len(rows)) - first_of_transaction,
        )

    def _versions(self, changed: np.ndarray, tables: set[int]) -> list[tuple[Relation, np.ndarray]]:
        """``changed`` (message indices) grouped by the relation definition each was made
        with: the last description before it, or the one known before the batch."""
        groups: list[tuple[Relation, np.ndarray]] = []
        oids = self.relation_ids[changed]
        for oid in sorted(tables):  # a few oids: masks, not np.unique over every change
            messages = changed[oids == oid] if len(tables) > 1 else changed
            if not len(messages):
                continue
            described = [(at, r) for at, r in self.descriptions if r.oid == oid]
            version = np.searchsorted([at for at, _ in described], messages) - 1
            for index in range(-1, len(described)):
                if not np.any(version == index):
                    continue
                relation = described[index][1] if index >= 0 else self.initial.get(int(oid))
                if relation is None:
                    raise ProtocolError(f"a change of relation {oid} before its description")
                groups.append((relation, messages[version == index]))
        return groups


def frame(
    messages: pa.Array | pa.ChunkedArray | Sequence[bytes], relations: dict[int, Relation]
) -> Batch:
    """``messages`` (the slot's ``data`` column, in order) framed into transactions;
    ``relations`` (by oid) is updated with the batch's descriptions, as
    :func:`gluon.source.pgoutput.transactions` updates it.

    Raises:
        ProtocolError: a message is malformed, or a change comes outside a transaction.
    """
    data, starts, ends = _buffers(messages)
    if np.any(ends <= starts):
        raise ProtocolError("an empty pgoutput message")
    kinds = data[starts]
    is_change = np.isin(kinds, _CHANGES)
    transaction, commits, begins = _transactions(kinds, is_change | (kinds == _T))
    _require_size(kinds, starts, ends, begins, _BEGIN_SIZE)
    _require_size(kinds, starts, ends, commits, _COMMIT_SIZE)
    changes = np.flatnonzero(is_change)
    _require_size(kinds, starts, ends, changes, 6)
    relation_ids = np.zeros(len(kinds), dtype=np.int64)
    relation_ids[changes] = _big_endian(data, starts[changes] + 1, ">u4")
    descriptions: list[tuple[int, Relation]] = []
    truncates: list[tuple[int, Truncate]] = []
    initial = dict(relations)
    for at in np.flatnonzero(~is_change & (kinds != _B) & (kinds != _C)):
        message = decode(data[starts[at] : ends[at]].tobytes())
        if isinstance(message, Relation):
            descriptions.append((int(at), message))
            relations[message.oid] = message
        elif isinstance(message, Truncate):
            truncates.append((int(at), message))
    return Batch(
        data=data,
        starts=starts,
        ends=ends,
        kinds=kinds,
        transaction=np.where(transaction >= 0, transaction, -1),
        commit_lsns=_big_endian(data, starts[commits] + 2, ">i8"),
        end_lsns=_big_endian(data, starts[commits] + 10, ">i8"),
        xids=_big_endian(data, starts[begins[: len(commits)]] + 17, ">u4"),
        relation_ids=relation_ids,
        descriptions=descriptions,
        truncates=truncates,
        initial=initial,
    )


def _buffers(
    messages: pa.Array | pa.ChunkedArray | Sequence[bytes],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every message's bytes in one buffer (then :data:`_BOOLEAN_TEXTS` and padding), and
    where each message starts and ends in it."""
    if isinstance(messages, pa.ChunkedArray):
        messages = messages.combine_chunks() if messages.num_chunks else pa.array([], pa.binary())
    if isinstance(messages, pa.Array):
        if messages.null_count:
            raise ProtocolError("a NULL pgoutput message")
        wide = pa.types.is_large_binary(messages.type)
        if not (wide or pa.types.is_binary(messages.type)):
            raise ProtocolError(f"pgoutput messages as {messages.type}, not binary")
        _, offsets_buffer, data_buffer = messages.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int64 if wide else np.int32)
        offsets = offsets[messages.offset : messages.offset + len(messages) + 1].astype(np.int64)
        raw = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer else np.zeros(0, np.uint8)
    else:
        lengths = np.fromiter((len(m) for m in messages), dtype=np.int64, count=len(messages))
        offsets = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(lengths)])
        raw = np.frombuffer(b"".join(messages), dtype=np.uint8)
    end = int(offsets[-1]) if len(offsets) else 0
    data = np.concatenate(
        [
            raw[:end],
            np.frombuffer(_BOOLEAN_TEXTS, dtype=np.uint8),
            np.zeros(_PADDING, dtype=np.uint8),
        ]
    )
    return data, offsets[:-1], offsets[1:]


def _transactions(
    kinds: np.ndarray, is_change: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per message its transaction's index (-2 outside one), and where the COMMITs and
    BEGINs are.

    Raises:
        ProtocolError: a change outside a transaction, a COMMIT without its BEGIN, or a
            BEGIN inside a transaction (the first of them in the batch).
    """
    marks = np.flatnonzero((kinds == _B) | (kinds == _C))
    marked = kinds[marks]
    expected = np.where(np.arange(len(marks)) % 2 == 0, _B, _C)
    wrong = np.flatnonzero(marked != expected)
    last_mark = np.cumsum((kinds == _B) | (kinds == _C)) - 1  # the last BEGIN or COMMIT so far
    inside = (last_mark >= 0) & (last_mark % 2 == 0)
    transaction = np.where(inside, last_mark // 2, -2)
    # Read up to the first misplaced BEGIN or COMMIT, the marks pair up.
    outside = np.flatnonzero(is_change & ~inside)
    if len(outside) and (not len(wrong) or outside[0] < marks[wrong[0]]):
        raise ProtocolError("a change outside a transaction")
    if len(wrong):
        if marked[wrong[0]] == _C:
            raise ProtocolError("a COMMIT without its BEGIN")
        raise ProtocolError("a BEGIN inside a transaction")
    # The last transaction has no COMMIT in the batch: not whole, not shipped.
    open_transaction = len(marks) // 2 if len(marks) % 2 else -3
    transaction = np.where(transaction == open_transaction, -1, transaction)
    return transaction, marks[1::2], marks[0::2]


def _require_size(
    kinds: np.ndarray, starts: np.ndarray, ends: np.ndarray, at: np.ndarray, size: int
) -> None:
    short = at[ends[at] - starts[at] < size]
    if len(short):
        kind = chr(kinds[short[0]])
        raise ProtocolError(f"a truncated or malformed pgoutput {kind!r} message")


def _big_endian(data: np.ndarray, positions: np.ndarray, dtype: str) -> np.ndarray:
    """The big-endian numbers of ``dtype`` at ``positions`` of ``data``, as int64."""
    width = np.dtype(dtype).itemsize
    gathered = data[positions[:, None] + np.arange(width)]
    return np.ascontiguousarray(gathered).view(dtype).reshape(-1).astype(np.int64)


@dataclass(slots=True)
class _Values:
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

    def column(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        return self.starts[index], self.lengths[index]

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


class _Walk:
    """One relation definition's INSERTs, UPDATEs and DELETEs, read column by column."""

    def __init__(self, batch: Batch, relation: Relation, messages: np.ndarray) -> None:
        self.data = batch.data
        self.relation = relation
        self.starts = batch.starts[messages]
        self.ends = batch.ends[messages]
        self.kinds = batch.kinds[messages]
        self.width = len(relation.columns)

    def _fail(self, rows: np.ndarray, why: str) -> None:
        if len(rows):
            kind = chr(self.kinds[rows[0]])
            raise ProtocolError(f"a truncated or malformed pgoutput {kind!r} message: {why}")

    def values(self) -> _Values:
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
        with_old = np.isin(new_rows, old_rows)
        after_old = old_ends[np.searchsorted(old_rows, new_rows[with_old])]
        if np.any(self.data[after_old] != _NEW):
            raise ProtocolError("an UPDATE without its new row")
        new_at[with_old] = after_old + 1
        new_kinds, new_starts, new_lengths, _ = self._tuple(new_rows, new_at)
        count = len(self.starts)
        starts, lengths, unchanged, unlogged = [], [], [], []
        for column in range(self.width):
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
        return _Values(starts, lengths, unchanged, unlogged, names)

    def _tuple(
        self, rows: np.ndarray, at: np.ndarray
    ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray], np.ndarray]:
        """The tuples (``TupleData``) starting at ``at`` of the messages ``rows``: per
        column each value's kind, start and length, then where each tuple ends."""
        ends = self.ends[rows]
        self._fail(rows[at + 2 > ends], "its row ends early")
        counts = _big_endian(self.data, at, ">i2")
        if np.any(counts != self.width):
            wrong = int(counts[counts != self.width][0])
            raise ProtocolError(
                f"a change of {self.relation.schema}.{self.relation.name} with {wrong} "
                f"columns, where its description has {self.width}"
            )
        at = at + 2
        kinds, starts, lengths = [], [], []
        for _ in range(self.width):
            self._fail(rows[at >= ends], "its row ends early")
            kind = self.data[at]
            unknown = np.flatnonzero((kind != _NULL) & (kind != _UNCHANGED) & (kind != _TEXT))
            if len(unknown):
                raise ProtocolError(
                    f"a column value of kind {chr(kind[unknown[0]])!r} (proto v1 has n, u, t)"
                )
            text = kind == _TEXT
            self._fail(rows[text & (at + 5 > ends)], "a value's length is cut off")
            length = np.where(text, _big_endian(self.data, at + 1, ">i4"), 0)
            self._fail(
                rows[text & ((length < 0) | (at + 5 + length > ends))], "a value runs past it"
            )
            kinds.append(kind)
            starts.append(at + 5)
            lengths.append(length)
            at = np.where(text, at + 5 + length, at + 1)
        return kinds, starts, lengths, at


def _booleans(
    data: np.ndarray, start: np.ndarray, length: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """A boolean's ``t``/``f`` as ``true``/``false`` (slices of :data:`_BOOLEAN_TEXTS`)."""
    texts_at = len(data) - _PADDING - len(_BOOLEAN_TEXTS)
    single = length == 1
    first = data[np.where(single, start, 0)]
    true, false = single & (first == ord("t")), single & (first == ord("f"))
    start = np.where(true, texts_at, np.where(false, texts_at + 4, start))
    length = np.where(true, 4, np.where(false, 5, length))
    return start, length


def _string_array(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
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
