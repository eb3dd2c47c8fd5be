"""PostgreSQL logical decoding: the text rows of the ``test_decoding`` output plugin, parsed.

A change reads ``table SCHEMA.TABLE: OP: col[type]:value ...``; an UPDATE whose
replica identity logged the old row reads ``... UPDATE: old-key: <old> new-tuple:
<new>``. Values are the type's output function text: ``null``, a bare token
(numbers, booleans), or a quoted literal with ``''`` for a quote. Names that
need quoting are double-quoted, with ``""`` for a double quote.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

_UNCHANGED_TOAST_TEXT = "unchanged-toast-datum"
UNCHANGED_TOAST = "\x00" + _UNCHANGED_TOAST_TEXT
"""The value of a large column an UPDATE left alone: not in the WAL, test_decoding prints
``unchanged-toast-datum`` bare. The NUL makes it no text PostgreSQL can hold."""

_PLAIN_NAME = re.compile(r"^[a-z_][a-z0-9_$]*$")


class DecodingError(ValueError):
    """A test_decoding row gluon cannot read."""


@dataclass(frozen=True, slots=True)
class DecodedChange:
    """One row change: its operation and values as text (None: SQL NULL), by column name."""

    table: str
    """``schema.table`` as test_decoding names it (quoted where PostgreSQL would quote)."""
    op: str
    """``INSERT``, ``UPDATE`` or ``DELETE``."""
    new: dict[str, str | None]
    """The new row (INSERT, UPDATE), or the old key or row of a DELETE."""
    old: dict[str, str | None] | None = None
    """The old key or row an UPDATE logged (None: the key did not change)."""


def quote_name(name: str) -> str:
    """``name`` as PostgreSQL's quote_identifier prints it."""
    if _PLAIN_NAME.match(name):
        return name
    return '"' + name.replace('"', '""') + '"'


def table_label(schema: str, table: str) -> str:
    """How test_decoding names ``schema.table`` in a change row."""
    return f"{quote_name(schema)}.{quote_name(table)}"


def parse_change(data: str) -> DecodedChange | None:
    """The change ``data`` describes (None: a BEGIN, COMMIT or message row).

    Raises:
        DecodingError: the row is not in test_decoding's format.
    """
    if not data.startswith("table "):
        return None
    header = _HEADER.match(data)
    if header is not None:
        fast = _read_tuples_fast(data, header.end())
        if fast is not None:
            return DecodedChange(header["table"], header["op"], *fast)
    position = 6
    table, position = _read_name(data, position)
    if data[position] == ".":
        rest, position = _read_name(data, position + 1)
        table = f"{table}.{rest}"
    if data[position : position + 2] != ": ":
        raise DecodingError(f"no operation after the table in {data[:200]!r}")
    position += 2
    end = data.find(":", position)
    if end < 0:
        raise DecodingError(f"no operation in {data[:200]!r}")
    op = data[position:end]
    position = end + 1
    if data.startswith(" old-key:", position):
        old, position = _read_tuple(data, position + len(" old-key:"), stop=" new-tuple:")
        new, position = _read_tuple(data, position + len(" new-tuple:"))
        return DecodedChange(table, op, new, old)
    if data.startswith(" (no-tuple-data)", position):
        raise DecodingError(
            f"{op} on {table} logged no row: the table has no replica identity (add a primary "
            "key or ALTER TABLE ... REPLICA IDENTITY FULL)"
        )
    new, position = _read_tuple(data, position)
    return DecodedChange(table, op, new)


_NAME = r'"[^"]*(?:""[^"]*)*"|[^".:\[ ]+'
_TYPE = r'\[[^\[\]"]*(?:\[\][^\[\]"]*)*\]'
_QUOTED = r"'[^']*(?:''[^']*)*'"
_BARE_TOKEN = r"[^ ']*"
_HEADER = re.compile(rf"table (?P<table>(?:{_NAME})(?:\.(?:{_NAME}))?): (?P<op>[^:]*):")
_ITEMS = re.compile(
    rf" (?:(?P<name>{_NAME}){_TYPE}:"
    rf"(?:(?P<quoted>{_QUOTED})|(?P<bare>{_BARE_TOKEN}))|(?P<stop>new-tuple:))"
    r"|(?P<other>(?s:.))"
)
"""A ``col[type]:value`` item, the `` new-tuple:`` between an old key and the new row, or any
other character: one match after another from the start, as the careful reader reads them."""
_BARE = {"null": None, _UNCHANGED_TOAST_TEXT: UNCHANGED_TOAST}


def _read_tuples_fast(
    data: str, position: int
) -> tuple[dict[str, str | None], dict[str, str | None] | None] | None:
    """The new row and the old key (or None) after the operation at ``position``, read by one
    regular expression rather than character by character (the extraction's hot loop); None
    where the row is not plainly ``col[type]:value`` items (the careful reader decides).
    """
    has_old = data.startswith(" old-key:", position)
    if has_old:
        position += len(" old-key:")
    values: dict[str, str | None] = {}
    tuples = [values]
    for name, quoted, bare, stop, other in _ITEMS.findall(data, position):
        if other:
            return None
        if stop:
            values = {}
            tuples.append(values)
            continue
        if name[0] == '"':
            name = name[1:-1].replace('""', '"')
        values[name] = quoted[1:-1].replace("''", "'") if quoted else _BARE.get(bare, bare)
    if len(tuples) != (2 if has_old else 1):
        return None
    if has_old:
        return tuples[1], tuples[0]
    return tuples[0], None


_RAW_VALUE = f"({_QUOTED}|{_BARE_TOKEN})"


def plain_row_pattern(label: str, columns: Sequence[str]) -> re.Pattern[str]:
    """A pattern reading a plain change row of table ``label`` in one match: the operation,
    then each of ``columns`` (in this order, each optional: a DELETE logs the key only) as its
    raw printed value, for :func:`plain_values`. Rows it does not match (an old key, another
    column order, a name PostgreSQL quotes as a keyword, a ``B'...'`` bit string) are for
    :func:`parse_change`: one match per row instead of ``findall`` and a dict (the extraction's
    hot loop).
    """
    items = "".join(f"(?: {re.escape(quote_name(name))}{_TYPE}:{_RAW_VALUE})?" for name in columns)
    return re.compile(f"{re.escape(label)}: (INSERT|UPDATE|DELETE):{items}\\Z")


def plain_values(data: str, pattern: re.Pattern[str]) -> tuple[str, list[str | None]] | None:
    """The operation and the column values (None: SQL NULL or not logged) of change row
    ``data`` (after its ``table `` prefix: ``pattern`` matches from position 6), read by
    ``pattern`` from :func:`plain_row_pattern`; None where the row is not plain (the careful
    reader decides), among them an UPDATE that left a large value out of the WAL.
    """
    match = pattern.match(data, 6)
    if match is None or _UNCHANGED_TOAST_TEXT in data:
        return None
    op, *raw = match.groups()
    return (
        op,
        [  # inline, not a function per value: this runs once per value extracted
            None
            if value is None or value == "null"
            else value[1:-1].replace("''", "'")
            if value[:1] == "'"
            else value
            for value in raw
        ],
    )


def _read_name(data: str, position: int) -> tuple[str, int]:
    """A possibly double-quoted name starting at ``position``, kept as printed."""
    if data.startswith('"', position):
        end = position + 1
        while True:
            end = data.find('"', end)
            if end < 0:
                raise DecodingError(f"unterminated quoted name in {data[:200]!r}")
            if data.startswith('""', end):
                end += 2
                continue
            return data[position : end + 1], end + 1
    end = position
    while end < len(data) and data[end] not in ".:[ ":
        end += 1
    return data[position:end], end


def _unquote_name(name: str) -> str:
    if name.startswith('"'):
        return name[1:-1].replace('""', '"')
    return name


def _read_tuple(
    data: str, position: int, stop: str | None = None
) -> tuple[dict[str, str | None], int]:
    """``col[type]:value`` items separated by spaces, up to ``stop`` or the end."""
    values: dict[str, str | None] = {}
    while position < len(data):
        if stop is not None and data.startswith(stop, position):
            return values, position
        if data[position] != " ":
            raise DecodingError(f"expected a space at {position} in {data[:200]!r}")
        name, position = _read_name(data, position + 1)
        if not data.startswith("[", position):
            raise DecodingError(f"no type after column {name} in {data[:200]!r}")
        depth, position = 1, position + 1
        while depth:  # the type may itself hold brackets: integer[]
            if position >= len(data):
                raise DecodingError(f"unterminated type of column {name} in {data[:200]!r}")
            depth += {"[": 1, "]": -1}.get(data[position], 0)
            position += 1
        if not data.startswith(":", position):
            raise DecodingError(f"no value for column {name} in {data[:200]!r}")
        value, position = _read_value(data, position + 1)
        values[_unquote_name(name)] = value
    if stop is not None:
        raise DecodingError(f"no {stop.strip()!r} in {data[:200]!r}")
    return values, position


def _read_value(data: str, position: int) -> tuple[str | None, int]:
    if data.startswith("'", position):
        parts: list[str] = []
        start = position + 1
        while True:
            end = data.find("'", start)
            if end < 0:
                raise DecodingError(f"unterminated value in {data[:200]!r}")
            parts.append(data[start:end])
            if data.startswith("''", end):
                parts.append("'")
                start = end + 2
                continue
            return "".join(parts), end + 1
    end = data.find(" ", position)
    if end < 0:
        end = len(data)
    token = data[position:end]
    if token == "null":
        return None, end
    if token == _UNCHANGED_TOAST_TEXT:
        return UNCHANGED_TOAST, end
    return token, end


_COMMIT_TIME = re.compile(r"^COMMIT(?: \d+)? \(at (?P<at>[^)]+)\)$")


def commit_time(data: str) -> dt.datetime | None:
    """When the transaction a ``COMMIT`` row ends committed, naive UTC (None: the row has no
    time: another row, or a slot peeked without ``include-timestamp``).

    test_decoding prints the time in ISO form whatever ``DateStyle`` is, in the session's
    time zone with its offset.
    """
    match = _COMMIT_TIME.match(data)
    if match is None:
        return None
    try:
        at = dt.datetime.fromisoformat(match.group("at"))
    except ValueError:
        return None  # a time Python cannot hold (BC, infinity): unknown, not wrong
    if at.tzinfo is not None:
        at = at.astimezone(dt.UTC).replace(tzinfo=None)
    return at
