"""A batch of pgoutput protocol v1 messages decoded straight into Arrow (issue 33, item 2).

What :func:`gluon.source.pgoutput.transactions` and :func:`~gluon.source.pgoutput.table_rows`
give, one message and one value at a time in Python, this gives column at a time: the
messages' kinds, transactions and relation ids are read with numpy over the whole batch;
the rare messages (a relation's description, a TRUNCATE, a type) go through the scalar
decoder; then, for one relation definition at a time, each column of every INSERT, UPDATE
and DELETE is walked over all of its messages at once (a position per message: the kind
byte ``n``/``u``/``t``, a big-endian length, the value's bytes), and each of the table's
columns becomes one Arrow string array cut from the slot's own buffer by offsets
(``gluon.source.pgoutput_columns``). No Python object per change or per value.

The result is the same text, in the same order, with the same errors, as the scalar path
(``tests/integration/test_pgoutput_batch.py`` compares them on real slots), ready for
``gluon.source.logical_values``' typing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gluon.schema import TableSpec, arrow_string_scalar
from gluon.source import key_moves
from gluon.source.logical_values import _typed, present_values
from gluon.source.pgoutput import (
    ABSENT,
    ProtocolError,
    Relation,
    Truncate,
    UnloggedValueError,
    decode,
)
from gluon.source.pgoutput_columns import (
    BOOLEAN_TEXTS,
    PADDING,
    ColumnValues,
    RelationChanges,
    big_endian,
    string_array,
)

_B, _C, _I, _U, _D, _T = (ord(kind) for kind in "BCIUDT")
_CHANGES = np.array([_I, _U, _D], dtype=np.uint8)
_BEGIN_SIZE, _COMMIT_SIZE = 21, 26
"""``B`` final LSN, timestamp, xid; ``C`` flags, commit LSN, end LSN, timestamp."""


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
        texts = [
            present_values(values, column.missing_value)
            for values, column in zip(self.columns, spec.columns, strict=True)
        ]
        return _typed(texts, seqs, self.ops, spec, schema)


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
    commit_times: np.ndarray
    """Per whole transaction: its COMMIT's timestamp, microseconds since
    :data:`~gluon.source.pgoutput.POSTGRES_EPOCH` (what status shows as the oldest change)."""
    xids: np.ndarray
    relation_ids: np.ndarray
    """Per message: the relation of an INSERT, UPDATE or DELETE, else 0."""
    descriptions: list[tuple[int, Relation]]
    """Each Relation message of the batch (message index, relation), in order."""
    truncates: list[tuple[int, Truncate]]
    initial: dict[int, Relation]
    """The relations known before the batch's first message."""

    def table(
        self,
        tables: set[int],
        names: list[str],
        keys: Sequence[str] = (),
        shipped: np.ndarray | None = None,
    ) -> TableChanges:
        """The changes of the relations ``tables`` (a table's oid, or its root's with
        ``publish_via_partition_root``), values in the order of ``names`` (a column the
        relation lacks is :data:`~gluon.source.pgoutput.ABSENT`, as ``table_rows`` gives it;
        a DELETE or a key-only old row has its key, the rest NULL). An UPDATE that changed
        any of ``keys`` is a DELETE of the old row and an INSERT of the new (as
        :func:`gluon.source.pgoutput.table_rows` ships it). ``shipped`` (per whole
        transaction): read those only (None: every whole one).

        Raises:
            UnloggedValueError: an UPDATE left a large value out and no old row holds it.
            ProtocolError: a change is malformed, or names a relation never described.
        """
        whole = self.transaction >= 0
        if shipped is not None:
            whole &= shipped[np.maximum(self.transaction, 0)]
        changed = np.flatnonzero(whole & np.isin(self.relation_ids, list(tables)))
        truncated = [
            at
            for at, truncate in self.truncates
            if whole[at] and not tables.isdisjoint(truncate.relations)
        ]
        rows = changed
        if truncated:  # rare: a sort only then (np.union1d hashes a million rows)
            rows = np.sort(np.concatenate([changed, np.array(truncated, dtype=np.int64)]))
        starts = np.zeros((len(names), len(rows)), dtype=np.int64)
        lengths = np.full((len(names), len(rows)), -1, dtype=np.int64)
        absent = np.zeros((len(names), len(rows)), dtype=bool)
        unlogged: tuple[int, list[str]] | None = None
        split = _KeyUpdates(len(names), len(rows))
        keys_at = [names.index(key) for key in keys if key in names]
        for relation, messages in self._versions(changed, tables):
            # One relation definition and no TRUNCATE (the usual batch): its rows are all.
            at = slice(None) if len(messages) == len(rows) else np.searchsorted(rows, messages)
            values = RelationChanges(
                self.data,
                relation,
                self.starts[messages],
                self.ends[messages],
                self.kinds[messages],
            ).values(keys)
            order = {column.name: index for index, column in enumerate(relation.columns)}
            for slot, name in enumerate(names):
                if name in order:
                    starts[slot, at], lengths[slot, at] = values.column(order[name])
                else:  # a change made before the column was added
                    absent[slot, at] = True
            if values.key_changed is not None:
                split.add(at, values, [order.get(name) for name in names])
            first = values.first_unlogged()
            if first is not None and (unlogged is None or messages[first[0]] < unlogged[0]):
                unlogged = (int(messages[first[0]]), first[1])
        if unlogged is not None:
            raise UnloggedValueError(unlogged[1])
        transactions = self.transaction[rows]
        if split.any():
            kinds = self.kinds[rows]
            netted = split.widened(kinds, transactions)
            kinds, transactions, starts, lengths, absent = split.expanded(
                kinds, transactions, starts, lengths, absent
            )
            if len(netted):
                kept, kinds = key_moves.netted(
                    self.data, kinds, transactions, (starts, lengths, absent), netted, keys_at
                )
                transactions, starts, lengths, absent = (
                    transactions[kept],
                    starts[:, kept],
                    lengths[:, kept],
                    absent[:, kept],
                )
            ops = key_moves.op_texts(kinds)
        else:
            ops = string_array(self.data, self.starts[rows], np.ones_like(rows))  # kind = gl_op
        # Where each change's transaction starts among the rows: carried from each boundary.
        first_of_transaction = np.zeros(len(transactions), dtype=np.int64)
        boundaries = np.flatnonzero(np.diff(transactions)) + 1
        first_of_transaction[boundaries] = boundaries
        np.maximum.accumulate(first_of_transaction, out=first_of_transaction)
        return TableChanges(
            ops=ops,
            columns=[
                _marked_absent(string_array(self.data, s, n), gone)
                for s, n, gone in zip(starts, lengths, absent, strict=True)
            ],
            transactions=transactions,
            positions=np.arange(len(transactions)) - first_of_transaction,
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
            # Messages and descriptions in batch order: each definition's changes are the
            # run between its description and the next (the first: before any).
            cuts = np.searchsorted(messages, [at for at, _ in described])
            runs = np.split(messages, cuts)
            for index, run in enumerate(runs, start=-1):
                if not len(run):
                    continue
                relation = described[index][1] if index >= 0 else self.initial.get(int(oid))
                if relation is None:
                    raise ProtocolError(f"a change of relation {oid} before its description")
                groups.append((relation, run))
        return groups


class _KeyUpdates:
    """The UPDATEs of a table's rows that changed its key: each becomes a DELETE of its old
    row, then an INSERT of its new row."""

    def __init__(self, width: int, count: int) -> None:
        self.rows = np.zeros(count, dtype=bool)
        self.whole_old = np.zeros(count, dtype=bool)
        self.starts = np.zeros((width, count), dtype=np.int64)
        self.lengths = np.full((width, count), -1, dtype=np.int64)

    def add(self, at: slice | np.ndarray, values: ColumnValues, columns: list[int | None]) -> None:
        """One relation definition's changes, at ``at`` among the rows; ``columns``: each
        wanted name's index in the relation (None: not one of its columns)."""
        assert values.key_changed is not None
        self.rows[at] = values.key_changed
        assert values.whole_old is not None
        self.whole_old[at] = values.whole_old
        for slot, column in enumerate(columns):
            if column is not None:
                self.starts[slot, at], self.lengths[slot, at] = values.old_column(column)

    def any(self) -> bool:
        return bool(self.rows.any())

    def widened(self, kinds: np.ndarray, transactions: np.ndarray) -> np.ndarray:
        """The transactions that moved keys whose changes all carry whole old rows (their net
        change per key is shipped: ``gluon.source.key_moves``), their UPDATEs in place now
        split too (a DELETE of the old row, an INSERT of the new) for the matching."""
        moved = np.unique(transactions[self.rows])
        inside = np.isin(transactions, moved)
        unmatched = inside & ~((kinds == _I) | self.whole_old)  # a TRUNCATE, a key-only row
        netted = np.setdiff1d(moved, transactions[unmatched])
        if len(netted):
            self.rows |= np.isin(transactions, netted) & (kinds == _U)
        return netted

    def expanded(
        self,
        kinds: np.ndarray,
        transactions: np.ndarray,
        starts: np.ndarray,
        lengths: np.ndarray,
        absent: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The rows with a DELETE before each key-changing UPDATE, which becomes an INSERT:
        ``gl_op`` (its byte), transactions, value starts and lengths, and which values are absent (a
        DELETE's as its UPDATE's, as the scalar decoder gives them)."""
        split = self.rows
        before = np.cumsum(split) - split  # the DELETEs placed before each row
        count = len(split) + int(split.sum())
        kept = np.arange(len(split)) + before + split
        deletes = (np.arange(len(split)) + before)[split]
        out_starts = np.zeros((len(starts), count), dtype=np.int64)
        out_lengths = np.full((len(starts), count), -1, dtype=np.int64)
        out_starts[:, kept], out_lengths[:, kept] = starts, lengths
        out_absent = np.zeros((len(starts), count), dtype=bool)
        out_absent[:, kept] = absent
        out_absent[:, deletes] = absent[:, split]  # the old row's relation lacks them too
        out_starts[:, deletes] = self.starts[:, split]
        out_lengths[:, deletes] = self.lengths[:, split]
        ops = np.empty(count, dtype=np.uint8)
        ops[kept] = kinds
        ops[kept[split]] = _I
        ops[deletes] = _D
        out_transactions = np.empty(count, dtype=transactions.dtype)
        out_transactions[kept] = transactions
        out_transactions[deletes] = transactions[split]
        return ops, out_transactions, out_starts, out_lengths, out_absent


def _marked_absent(values: pa.Array, absent: np.ndarray) -> pa.Array:
    """``values`` with :data:`~gluon.source.pgoutput.ABSENT` where ``absent``: a change made
    before the column was added (rare: nothing to do for nearly every batch)."""
    if not absent.any():
        return values
    mask = pa.Array.from_buffers(
        pa.bool_(), len(absent), [None, pa.py_buffer(np.packbits(absent, bitorder="little"))]
    )
    return pc.if_else(mask, arrow_string_scalar(ABSENT), values)


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
    relation_ids[changes] = big_endian(data, starts[changes] + 1, ">u4")
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
        commit_lsns=big_endian(data, starts[commits] + 2, ">i8"),
        end_lsns=big_endian(data, starts[commits] + 10, ">i8"),
        commit_times=big_endian(data, starts[commits] + 18, ">i8"),
        xids=big_endian(data, starts[begins[: len(commits)]] + 17, ">u4"),
        relation_ids=relation_ids,
        descriptions=descriptions,
        truncates=truncates,
        initial=initial,
    )


def _buffers(
    messages: pa.Array | pa.ChunkedArray | Sequence[bytes],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every message's bytes in one buffer (then :data:`BOOLEAN_TEXTS` and padding), and
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
            np.frombuffer(BOOLEAN_TEXTS, dtype=np.uint8),
            np.zeros(PADDING, dtype=np.uint8),
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
