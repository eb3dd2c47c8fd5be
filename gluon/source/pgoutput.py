"""pgoutput's binary protocol, version 1, decoded in Python (issue 33, deliverable 1).

What ``pg_logical_slot_peek_binary_changes(slot, upto_lsn, upto_n, 'proto_version', '1',
'publication_names', ...)`` returns for a pgoutput slot: one message per row, filtered at
the source by the publication, so a slot shared by every table of a database decodes each
transaction once. Values are the type's text output (proto v1), as test_decoding's are
after unquoting; a column whose large value an UPDATE left alone arrives as
:data:`UNCHANGED_TOAST`. The layout is PostgreSQL's "Logical Replication Message Formats".

This module only reads bytes: which messages belong to which table, and which commits a
table ships, is the feed's business.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from gluon.source import key_moves

UNCHANGED_TOAST = object()
"""A value the UPDATE did not change and the WAL does not hold (TOAST): take it from the
old row, or from the lake."""

ABSENT = "\x00absent"
"""The text of a wanted column the change's relation did not have (a change made before the
column was added): no PostgreSQL text holds a NUL. ``changes_as_arrow`` reads it as the
column's ``missing_value`` (the default the rows read since), or NULL."""

POSTGRES_EPOCH = dt.datetime(2000, 1, 1)
"""pgoutput's timestamps count microseconds from here (naive UTC, as the slot's clock)."""

BOOL_OID = 16
_BOOLEANS = {"t": "true", "f": "false"}
"""pgoutput sends a boolean's output text (``t``/``f``); test_decoding, whose text the
Arrow path reads, prints ``true``/``false``."""


Value = str | None | object
"""A column's text, None (SQL NULL), or :data:`UNCHANGED_TOAST`."""


class ProtocolError(ValueError):
    """A message that is not pgoutput protocol version 1 as this module knows it."""


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    in_key: bool
    """Part of the replica identity: an UPDATE's or DELETE's old key has it."""


@dataclass(frozen=True, slots=True)
class Relation:
    """A table as the slot describes it (sent before its first change in a session, and
    again after its definition changed)."""

    oid: int
    schema: str
    name: str
    replica_identity: str
    """``d`` default (the key), ``n`` nothing, ``f`` full, ``i`` an index."""
    columns: tuple[Column, ...]


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int
    """The LSN of the transaction's commit record."""
    committed_at: dt.datetime
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    commit_lsn: int
    end_lsn: int
    committed_at: dt.datetime


@dataclass(frozen=True, slots=True)
class Change:
    """An INSERT (``I``), UPDATE (``U``) or DELETE (``D``) of one row of ``relation``."""

    op: str
    relation: int
    new: tuple[Value, ...] | None
    """The row after an INSERT or UPDATE, in the relation's column order."""
    old: tuple[Value, ...] | None
    """Before an UPDATE (when the key changed, or REPLICA IDENTITY FULL) or a DELETE: the
    key columns only (``old_is_key``), the others None; or the whole row."""
    old_is_key: bool = False


@dataclass(frozen=True, slots=True)
class Truncate:
    relations: tuple[int, ...]
    cascade: bool
    restart_identity: bool


Message = Relation | Begin | Commit | Change | Truncate


_INT8 = struct.Struct("!b")
_INT16 = struct.Struct("!h")
_INT32 = struct.Struct("!i")
_UINT32 = struct.Struct("!I")
_INT64 = struct.Struct("!q")
_TEXT, _NULL, _TOAST = ord("t"), ord("n"), ord("u")


@dataclass(slots=True)
class _Reader:
    data: bytes
    at: int = 0

    def byte(self) -> str:
        value = chr(self.data[self.at])
        self.at += 1
        return value

    def _number(self, layout: struct.Struct) -> int:
        value: int = layout.unpack_from(self.data, self.at)[0]
        self.at += layout.size
        return value

    def int8(self) -> int:
        return self._number(_INT8)

    def int16(self) -> int:
        return self._number(_INT16)

    def int32(self) -> int:
        return self._number(_INT32)

    def uint32(self) -> int:
        return self._number(_UINT32)

    def int64(self) -> int:
        return self._number(_INT64)

    def text(self) -> str:
        end = self.data.index(b"\0", self.at)
        value = self.data[self.at : end].decode()
        self.at = end + 1
        return value

    def timestamp(self) -> dt.datetime:
        return POSTGRES_EPOCH + dt.timedelta(microseconds=self.int64())

    def tuple_data(self) -> tuple[Value, ...]:
        # The extraction's hot loop (a message per change): locals, no method call a value.
        data, at = self.data, self.at
        count = _INT16.unpack_from(data, at)[0]
        at += 2
        values: list[Value] = []
        for _ in range(count):
            kind = data[at]
            at += 1
            if kind == _TEXT:
                length = _INT32.unpack_from(data, at)[0]
                at += 4
                values.append(data[at : at + length].decode())
                at += length
            elif kind == _NULL:
                values.append(None)
            elif kind == _TOAST:
                values.append(UNCHANGED_TOAST)
            else:
                raise ProtocolError(f"a column value of kind {chr(kind)!r} (proto v1 has n, u, t)")
        self.at = at
        return tuple(values)


def decode(data: bytes) -> Message | None:
    """One pgoutput message (None: a kind the feed has no use for, e.g. Type or Origin).

    Raises:
        ProtocolError: ``data`` is not a proto v1 message.
    """
    if not data:
        raise ProtocolError("an empty pgoutput message")
    reader = _Reader(data if isinstance(data, bytes) else bytes(data))
    kind = reader.byte()
    try:
        return _decode(kind, reader)
    except (struct.error, IndexError, UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, ProtocolError):
            raise
        raise ProtocolError(f"a truncated or malformed pgoutput {kind!r} message: {exc}") from exc


def _decode(kind: str, reader: _Reader) -> Message | None:
    if kind == "B":
        final_lsn = reader.int64()
        return Begin(final_lsn, reader.timestamp(), reader.uint32())
    if kind == "C":
        reader.int8()  # flags: none defined
        commit_lsn, end_lsn = reader.int64(), reader.int64()
        return Commit(commit_lsn, end_lsn, reader.timestamp())
    if kind == "R":
        return _relation(reader)
    if kind == "I":
        relation = reader.uint32()
        if reader.byte() != "N":
            raise ProtocolError("an INSERT without its new row")
        return Change("I", relation, reader.tuple_data(), None)
    if kind == "U":
        relation = reader.uint32()
        old_marker = reader.byte()
        old: tuple[Value, ...] | None = None
        new_marker = old_marker
        if old_marker in ("K", "O"):
            old = reader.tuple_data()
            new_marker = reader.byte()
        if new_marker != "N":
            raise ProtocolError("an UPDATE without its new row")
        return Change("U", relation, reader.tuple_data(), old, old_is_key=old_marker == "K")
    if kind == "D":
        relation = reader.uint32()
        marker = reader.byte()
        if marker not in ("K", "O"):
            raise ProtocolError("a DELETE without its old row or key")
        return Change("D", relation, None, reader.tuple_data(), old_is_key=marker == "K")
    if kind == "T":
        count = reader.int32()
        options = reader.int8()
        relations = tuple(reader.uint32() for _ in range(count))
        return Truncate(relations, cascade=bool(options & 1), restart_identity=bool(options & 2))
    if kind in ("Y", "O", "M"):
        return None  # a type's name, a replication origin, a logical message
    raise ProtocolError(f"a pgoutput message of kind {kind!r} (not protocol version 1)")


def _relation(reader: _Reader) -> Relation:
    oid = reader.uint32()
    schema, name = reader.text(), reader.text()
    identity = reader.byte()
    columns = []
    for _ in range(reader.int16()):
        flags = reader.int8()
        column_name = reader.text()
        type_oid, modifier = reader.uint32(), reader.int32()
        columns.append(Column(column_name, type_oid, modifier, in_key=bool(flags & 1)))
    return Relation(oid, schema or "pg_catalog", name, identity, tuple(columns))


@dataclass(slots=True)
class Transaction:
    """One committed transaction's changes, in order, as the slot sent them."""

    begin: Begin
    commit: Commit | None = None
    changes: list[Change | Truncate] = field(default_factory=list)


def transactions(
    messages: Iterable[bytes], relations: dict[int, Relation]
) -> Iterator[Transaction]:
    """The whole transactions in ``messages`` (the slot's rows' data, in order); relation
    messages update ``relations`` (by oid) as they come, so a change is read with the
    columns the table had when it was made. A transaction the rows end inside is not
    yielded (a peek that stopped mid-transaction reads it again next time).

    Raises:
        ProtocolError: a message is malformed, or a change comes outside a transaction.
    """
    open_transaction: Transaction | None = None
    for data in messages:
        message = decode(data)
        if isinstance(message, Relation):
            relations[message.oid] = message
        elif isinstance(message, Begin):
            open_transaction = Transaction(message)
        elif isinstance(message, Commit):
            if open_transaction is None:
                raise ProtocolError("a COMMIT without its BEGIN")
            open_transaction.commit = message
            yield open_transaction
            open_transaction = None
        elif message is not None:
            if open_transaction is None:
                raise ProtocolError("a change outside a transaction")
            open_transaction.changes.append(message)


class UnloggedValueError(ValueError):
    """An UPDATE left large values out of the WAL and no old row holds them."""

    def __init__(self, columns: list[str]) -> None:
        super().__init__(", ".join(columns))
        self.columns = columns


def table_rows(
    transaction: Transaction,
    relations: dict[int, Relation],
    tables: set[int],
    names: list[str],
    keys: Sequence[str] = (),
) -> tuple[list[str], list[list[str | None]]]:
    """The changes of ``transaction`` to the relations ``tables`` (a table's oid, or its
    root's with ``publish_via_partition_root``): each one's ``gl_op`` (I, U, D, or T for a
    TRUNCATE, every column NULL) and its values as text in the order of ``names`` (a DELETE
    or a key-only old row: the key, the other columns NULL; a name the relation lacks:
    :data:`ABSENT`). The rows ``changes_as_arrow``
    (``gluon.source.logical_values``) types, once numbered. An UPDATE that changed any of
    ``keys`` is a DELETE of the old key and an INSERT of the new row (as the test_decoding
    reader ships it): the old key's row must go from the lake. A transaction that moved
    keys and logged whole old rows (REPLICA IDENTITY FULL) gives its net change per key
    (``gluon.source.key_moves``).

    Raises:
        UnloggedValueError: an UPDATE left a large value out and no old row holds it.
        ProtocolError: a change names a relation the slot never described.
        key_moves.KeyNotUniqueError: such a transaction left two rows under one key.
    """
    ops: list[str] = []
    rows: list[list[str | None]] = []
    layouts: dict[Relation, _Layout] = {}
    moved = False
    olds: dict[int, list[str | None]] = {}  # UPDATEs in place: whole old rows, for key_moves
    for change in transaction.changes:
        if isinstance(change, Truncate):
            if not tables.isdisjoint(change.relations):
                ops.append("T")
                rows.append([None] * len(names))
            continue
        if change.relation not in tables:
            continue
        relation = relations.get(change.relation)
        if relation is None:
            raise ProtocolError(f"a change of relation {change.relation} before its description")
        if change.op == "U" and change.old is not None and keys:
            columns = [column.name for column in relation.columns]
            old = dict(zip(columns, change.old, strict=True))
            new = dict(zip(columns, change.new or (), strict=True))
            if any(old.get(key) != new.get(key) for key in keys):
                ops += ["D", "I"]
                rows.append(
                    _in_order(Change("D", change.relation, None, change.old), relation, names)
                )
                rows.append(_in_order(change, relation, names))
                moved = True
                continue
            if not change.old_is_key:
                olds[len(rows)] = _in_order(
                    Change("D", change.relation, None, change.old), relation, names
                )
        ops.append(change.op)
        new_row = change.new
        if new_row is not None and change.old is None and UNCHANGED_TOAST not in new_row:
            # The plain INSERT or UPDATE (nearly every change): by position, no dicts.
            layout = layouts.get(relation)
            if layout is None:
                layout = layouts[relation] = _Layout.of(relation, names)
            rows.append(layout.row(new_row))
            continue
        rows.append(_in_order(change, relation, names))
    if moved and _whole_old_rows(transaction, tables):
        netted = key_moves.net_rows(
            ops, rows, olds, [names.index(key) for key in keys if key in names]
        )
        if netted is not None:
            return netted
    return ops, rows


def _whole_old_rows(transaction: Transaction, tables: set[int]) -> bool:
    """Every UPDATE and DELETE of ``tables`` in ``transaction`` logged its whole old row."""
    return all(
        change.old is not None and not change.old_is_key
        for change in transaction.changes
        if isinstance(change, Change) and change.relation in tables and change.op in "UD"
    )


@dataclass(frozen=True, slots=True)
class _Layout:
    """Where each of the wanted columns is in a relation's tuples, and which are booleans."""

    positions: tuple[int, ...]
    """For each wanted name, its index in the relation's columns (-1: not a column)."""
    booleans: tuple[int, ...]
    """The wanted names' indexes (in the output) whose column is a boolean."""

    @classmethod
    def of(cls, relation: Relation, names: list[str]) -> _Layout:
        at = {column.name: index for index, column in enumerate(relation.columns)}
        positions = tuple(at.get(name, -1) for name in names)
        booleans = tuple(
            out
            for out, index in enumerate(positions)
            if index >= 0 and relation.columns[index].type_oid == BOOL_OID
        )
        return cls(positions, booleans)

    def row(self, values: tuple[Value, ...]) -> list[str | None]:
        row: list[str | None] = [
            values[index] if index >= 0 else ABSENT  # type: ignore[misc]
            for index in self.positions
        ]
        for out in self.booleans:
            value = row[out]
            row[out] = _BOOLEANS.get(value, value) if value is not None else None
        return row


def _in_order(change: Change, relation: Relation, names: list[str]) -> list[str | None]:
    columns = [column.name for column in relation.columns]
    old = dict(zip(columns, change.old, strict=True)) if change.old is not None else {}
    if change.new is None:
        values = old
    else:
        values = dict(zip(columns, change.new, strict=True))
        missing = [name for name, value in values.items() if value is UNCHANGED_TOAST]
        if missing:
            if any(old.get(name) in (None, UNCHANGED_TOAST) for name in missing):
                raise UnloggedValueError(missing)
            values.update({name: old[name] for name in missing})
    booleans = {column.name for column in relation.columns if column.type_oid == BOOL_OID}
    return [
        _text(values.get(name), boolean=name in booleans) if name in columns else ABSENT
        for name in names
    ]


def _text(value: Value, *, boolean: bool) -> str | None:
    if not isinstance(value, str):
        return None
    return _BOOLEANS.get(value, value) if boolean else value
