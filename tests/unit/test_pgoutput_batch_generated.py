"""The batch decoder against the scalar one on generated pgoutput streams: transactions of
INSERTs, UPDATEs (with and without an old key or row, values left out as unchanged TOAST),
DELETEs and TRUNCATEs of two relations, a relation described again with another column,
booleans, NULLs and text in any script; the stream cut anywhere. Equal output, or the same
error."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from gluon.source import pgoutput
from gluon.source.pgoutput import BOOL_OID, Relation
from gluon.source.pgoutput_batch import frame

TEXT_OID = 25
TABLES = (16384, 16390)

Value = str | None | bool  # True: left out as unchanged TOAST


def _relation(oid: int, types: list[int]) -> bytes:
    body = struct.pack("!I", oid) + b"app\0t" + str(oid).encode() + b"\0d"
    body += struct.pack("!h", len(types))
    for at, type_oid in enumerate(types):
        body += struct.pack("!b", 1 if at == 0 else 0) + f"c{at}".encode() + b"\0"
        body += struct.pack("!Ii", type_oid, -1)
    return b"R" + body


def _tuple(values: Sequence[Value]) -> bytes:
    out = struct.pack("!h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value is True:
            out += b"u"
        else:
            data = str(value).encode()
            out += b"t" + struct.pack("!i", len(data)) + data
    return out


texts = st.one_of(st.none(), st.sampled_from(["t", "f", ""]), st.text(max_size=6))


@st.composite
def streams(draw: st.DrawFn) -> list[bytes]:
    widths = {oid: draw(st.integers(1, 3)) for oid in TABLES}
    types = {
        oid: [draw(st.sampled_from([TEXT_OID, BOOL_OID])) for _ in range(widths[oid])]
        for oid in TABLES
    }
    messages = [_relation(oid, types[oid]) for oid in TABLES]
    lsn = 1000
    for xid in range(draw(st.integers(0, 4))):
        messages.append(b"B" + struct.pack("!qqI", lsn + 50, 0, xid))
        if draw(st.booleans()):  # a column added: described again before its changes
            oid = draw(st.sampled_from(TABLES))
            types[oid].append(draw(st.sampled_from([TEXT_OID, BOOL_OID])))
            messages.append(_relation(oid, types[oid]))
        for _ in range(draw(st.integers(0, 5))):
            oid = draw(st.sampled_from(TABLES))
            width = len(types[oid])
            row = st.lists(texts, min_size=width, max_size=width)
            kind = draw(st.sampled_from("IUUDT"))
            head = struct.pack("!I", oid)
            if kind == "I":
                messages.append(b"I" + head + b"N" + _tuple(draw(row)))
            elif kind == "U":
                new: list[Value] = [True if draw(st.integers(0, 3)) == 0 else v for v in draw(row)]
                marker = draw(st.sampled_from(["", "K", "O"]))
                old = _tuple(draw(row)) if marker else b""
                messages.append(b"U" + head + marker.encode() + old + b"N" + _tuple(new))
            elif kind == "D":
                marker = draw(st.sampled_from(["K", "O"]))
                messages.append(b"D" + head + marker.encode() + _tuple(draw(row)))
            else:
                messages.append(b"T" + struct.pack("!ib", 1, 0) + head)
        lsn += 100
        messages.append(b"C\0" + struct.pack("!qqq", lsn, lsn + 8, 0))
    return messages[: draw(st.integers(0, len(messages)))]


def _scalar(messages: list[bytes], tables: set[int], names: list[str]) -> object:
    relations: dict[int, Relation] = {}
    found = []
    for transaction in pgoutput.transactions(messages, relations):
        assert transaction.commit is not None
        ops, rows = pgoutput.table_rows(transaction, relations, tables, names)
        found += [
            (op, row, transaction.commit.commit_lsn) for op, row in zip(ops, rows, strict=True)
        ]
    return found


def _batched(messages: list[bytes], tables: set[int], names: list[str]) -> object:
    batch = frame(messages, {})
    changes = batch.table(tables, names)
    columns = [column.to_pylist() for column in changes.columns]
    rows = [list(row) for row in zip(*columns, strict=True)] if names else [[]] * len(changes)
    commits = batch.commit_lsns[changes.transactions].tolist()
    return list(zip(changes.ops.to_pylist(), rows, commits, strict=True))


def _outcome(decode: object, *args: object) -> object:
    try:
        return decode(*args)  # type: ignore[operator]
    except pgoutput.UnloggedValueError as exc:
        return ("unlogged", exc.columns)
    except pgoutput.ProtocolError as exc:
        return ("protocol", str(exc))


@settings(deadline=None, max_examples=200)
@given(streams(), st.sampled_from([{TABLES[0]}, {TABLES[1]}, set(TABLES)]))
def test_generated_streams_decode_as_the_scalar_decoder_does(
    messages: list[bytes], tables: set[int]
) -> None:
    names = ["c3", "c0", "c2", "c1", "absent"]
    assert _outcome(_batched, messages, tables, names) == _outcome(_scalar, messages, tables, names)
