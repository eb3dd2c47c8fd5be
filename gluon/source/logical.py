"""PostgreSQL logical decoding: the text rows of the ``test_decoding`` output plugin, parsed.

A change reads ``table SCHEMA.TABLE: OP: col[type]:value ...``; an UPDATE whose
replica identity logged the old row reads ``... UPDATE: old-key: <old> new-tuple:
<new>``; a TRUNCATE reads ``table A.B, C.D: TRUNCATE: (no-flags)`` (or ``restart_seqs``,
``cascade``), naming every relation it emptied. Values are the type's output function text:
``null``, a bare token (numbers, booleans), or a quoted literal with ``''`` for a quote.
Names go through the server's ``quote_identifier`` (double-quoted, ``""`` for a double
quote, when not a plain lower-case name or when a keyword that is not unreserved): gluon
asks the server for the same quoting (:func:`relation_labels`), never guesses it.

Why one module past 400 lines: the test_decoding text grammar, parsed in one place.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gluon.source.base import SourceDialect

_UNCHANGED_TOAST_TEXT = "unchanged-toast-datum"
UNCHANGED_TOAST = "\x00" + _UNCHANGED_TOAST_TEXT
"""The value of a large column an UPDATE left alone: not in the WAL, test_decoding prints
``unchanged-toast-datum`` bare. The NUL makes it no text PostgreSQL can hold."""


class DecodingError(ValueError):
    """A test_decoding row gluon cannot read."""


@dataclass(frozen=True, slots=True)
class DecodedChange:
    """One row change: its operation and values as text (None: SQL NULL), by column name."""

    table: str
    """``schema.table`` as test_decoding names it (quoted where PostgreSQL would quote)."""
    op: str
    """``INSERT``, ``UPDATE``, ``DELETE`` or ``TRUNCATE``."""
    new: dict[str, str | None]
    """The new row (INSERT, UPDATE), or the old key or row of a DELETE."""
    old: dict[str, str | None] | None = None
    """The old key or row an UPDATE logged (None: the key did not change)."""
    truncated: tuple[str, ...] = ()
    """Every relation a TRUNCATE emptied, as labelled (``table`` is the first)."""


TRUNCATE = "TRUNCATE"
_TRUNCATE_FLAGS = {"(no-flags)", "restart_seqs", "cascade"}


@dataclass(frozen=True, slots=True)
class LogicalRelation:
    """One relation of a table's partition tree, as the server names and logs it."""

    schema: str
    name: str
    label: str
    """``schema.name`` quoted by the server's ``quote_ident``: test_decoding's spelling."""
    is_leaf: bool
    """It holds rows (its changes are decoded under its own label); not a partitioned table."""
    replica_identity: str
    """``relreplident``: d (primary key), f (every column), i (an index), n (nothing)."""
    identity_key: tuple[str, ...]
    """The columns the WAL logs of an updated or deleted row's old version (d, i): the
    primary key or identity index, when immediate; empty: it logs none (a DEFERRABLE
    primary key is no replica identity to PostgreSQL)."""
    deferrable_key: bool = False
    """The primary key is DEFERRABLE."""


@dataclass(frozen=True, slots=True)
class RelationLabels:
    """How test_decoding names a table's changes now: the table and, when it is partitioned,
    every partition below it (changes name the leaf that holds the row), and its columns."""

    root: LogicalRelation
    relations: tuple[LogicalRelation, ...]
    """The root and every partition at any depth (the root alone when not partitioned)."""
    columns: dict[str, str]
    """Each column's name -> its label in a tuple (quoted by the server)."""
    labels: frozenset[str] = field(init=False)
    """The labels a row change of the table carries (its leaves'): looked up for every row
    of the slot, so computed once."""

    def __post_init__(self) -> None:
        leaves = frozenset(r.label for r in self.relations if r.is_leaf)
        object.__setattr__(self, "labels", leaves)

    def names_ours(self, label: str) -> bool:
        """``label`` names one of the table's relations, however it is quoted."""
        try:
            named = split_label(label)
        except DecodingError:
            return False
        return any(named == (r.schema, r.name) for r in self.relations)

    def empties_table(self, truncated: Sequence[str]) -> bool | None:
        """Whether a TRUNCATE of ``truncated`` empties the whole table (True), part of it
        (False: some partitions only), or none of it (None)."""
        named = set(truncated)
        if self.root.label in named or self.labels <= named:
            return True
        if named & {r.label for r in self.relations}:
            return False
        return None


@functools.lru_cache(maxsize=1024)
def split_label(label: str) -> tuple[str, ...]:
    """The names in a printed ``schema.table`` label, unquoted.

    Raises:
        DecodingError: ``label`` is not one or two printed names.
    """
    names: list[str] = []
    position = 0
    while True:
        name, position = _read_name(label, position)
        if not name:
            raise DecodingError(f"no name at {position} in label {label!r}")
        names.append(_unquote_name(name))
        if position == len(label):
            return tuple(names)
        if label[position] != "." or len(names) == 2:
            raise DecodingError(f"unexpected {label[position]!r} in label {label!r}")
        position += 1


def relation_labels(source: SourceDialect, schema: str, table: str) -> RelationLabels | None:
    """How test_decoding names ``schema.table``'s changes now (None: the table is gone),
    quoted by the server itself (``quote_ident`` is test_decoding's ``quote_identifier``),
    the partition tree read now so partitions attached since enable are the table's too.

    Raises:
        SourceError: the catalog cannot be read.
    """
    params = {"schema": schema, "table": table}
    relations = [
        LogicalRelation(
            row[0], row[1], row[2], bool(row[3]), str(row[4]), tuple(row[5] or ()), bool(row[6])
        )
        for row in source.run_query("logical_relations", params)
    ]
    root = next((r for r in relations if (r.schema, r.name) == (schema, table)), None)
    if root is None:
        return None
    columns = {str(row[0]): str(row[1]) for row in source.run_query("logical_columns", params)}
    return RelationLabels(root, tuple(relations), columns)


def dropped_table_labels(
    source: SourceDialect, schema: str, table: str, columns: Sequence[str]
) -> RelationLabels:
    """How test_decoding named ``schema.table``'s changes when the table is gone (dropped,
    or renamed) but its changes stay in the slot: the table alone (its partitions are not
    known any more), quoted by the server.

    Raises:
        SourceError: the server cannot be asked.
    """
    names = [schema, table, *columns]
    quoted = [str(row[0]) for row in source.run_query("quote_identifiers", {"names": names})]
    root = LogicalRelation(schema, table, f"{quoted[0]}.{quoted[1]}", True, "f", ())
    return RelationLabels(root, (root,), dict(zip(columns, quoted[2:], strict=True)))


def identity_problem(relation: LogicalRelation, key_columns: Sequence[str]) -> str | None:
    """Why PG_LOGICAL cannot apply ``relation``'s changes by key (None: it can): its WAL
    must log the key of an updated or deleted row (every column, REPLICA IDENTITY FULL, or
    an immediate primary key or replica identity index on the key columns), and no two of
    its rows may hold one key inside a transaction (a DEFERRABLE primary key lets
    ``UPDATE t SET id = id + 1`` land a row on a key another row leaves later; applied by
    key, that leave would delete the row landed). The one judgement of both slot scopes
    (enable checks it before placing the table): a relation passing it is also one a
    publication can use.
    """
    if not relation.is_leaf:
        return None
    key = ", ".join(key_columns) or "its key"
    logs_key = (
        relation.replica_identity in ("d", "i")
        and bool(relation.identity_key)
        and set(relation.identity_key) == set(key_columns)
    )
    if relation.deferrable_key and not logs_key:
        return (
            f"the primary key of {relation.label} is DEFERRABLE: inside a transaction two "
            "rows may hold one key, and PostgreSQL logs no old key through it: add a unique, "
            f"non-DEFERRABLE index on {key} and run ALTER TABLE {relation.label} REPLICA "
            "IDENTITY USING INDEX with it, or use --incremental-extraction-method=CHANGELOG "
            "(its triggers apply keys moved onto each other)"
        )
    if relation.replica_identity == "f" or logs_key:
        return None
    if relation.replica_identity == "n":
        why = f"{relation.label} has REPLICA IDENTITY NOTHING"
    elif relation.identity_key and relation.replica_identity in ("d", "i"):
        why = f"{relation.label} logs the old key on {', '.join(relation.identity_key)}, not {key}"
    else:
        why = f"{relation.label} has no primary key"
    return (
        f"{why}: run ALTER TABLE {relation.label} REPLICA IDENTITY FULL, or give it a "
        f"primary key on {key}"
    )


def parse_change(data: str) -> DecodedChange | None:
    """The change ``data`` describes (None: a BEGIN, COMMIT or message row).

    Raises:
        DecodingError: the row is not in test_decoding's format.
    """
    if not data.startswith("table "):
        return None
    header = _HEADER.match(data)
    if header is not None and header["op"] != TRUNCATE:
        fast = _read_tuples_fast(data, header.end())
        if fast is not None:
            return DecodedChange(header["table"], header["op"], *fast)
    tables, op, position = read_header(data)
    table = tables[0]
    if op == TRUNCATE:
        flags = data[position:].split()
        if not flags or not set(flags) <= _TRUNCATE_FLAGS:
            raise DecodingError(f"unknown TRUNCATE flags in {data[:200]!r}")
        return DecodedChange(table, op, {}, truncated=tables)
    if len(tables) > 1:
        raise DecodingError(f"{op} naming several tables in {data[:200]!r}")
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


def read_header(data: str) -> tuple[tuple[str, ...], str, int]:
    """The relation labels (several for a TRUNCATE) and the operation of change row ``data``,
    and where the rest starts.

    Raises:
        DecodingError: the row does not start like a test_decoding change.
    """
    header = _HEADER.match(data)
    if header is not None:  # one table (any row but a TRUNCATE of several): one match
        return (header["table"],), header["op"], header.end()
    if not data.startswith("table "):
        raise DecodingError(f"not a change row: {data[:200]!r}")
    tables: list[str] = []
    position = 6
    while True:
        start = position
        name, position = _read_name(data, position)
        if data.startswith(".", position):
            _, position = _read_name(data, position + 1)
        if not name or position == start:
            raise DecodingError(f"no table name at {start} in {data[:200]!r}")
        tables.append(data[start:position])
        if not data.startswith(", ", position):
            break
        position += 2
    if data[position : position + 2] != ": ":
        raise DecodingError(f"no operation after the table in {data[:200]!r}")
    position += 2
    end = data.find(":", position)
    if end < 0:
        raise DecodingError(f"no operation in {data[:200]!r}")
    return tuple(tables), data[position:end], end + 1


_NAME = r'"[^"]*(?:""[^"]*)*"|[^".:\[ ,]+'
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


def plain_row_pattern(labels: Iterable[str], columns: Sequence[str]) -> re.Pattern[str]:
    """A pattern reading a plain change row of a relation labelled one of ``labels`` (none:
    matched from the end of the label) in one match: the
    operation, then each of ``columns`` (column labels, in this order, each optional: a
    DELETE logs the key only) as its raw printed value, for :func:`plain_values`. Rows it
    does not match (an old key, another column order, a ``B'...'`` bit string) are for
    :func:`parse_change`: one match per row instead of ``findall`` and a dict (the
    extraction's hot loop).
    """
    items = "".join(f"(?: {re.escape(column)}{_TYPE}:{_RAW_VALUE})?" for column in columns)
    tables = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    return re.compile(f"(?:{tables}): (INSERT|UPDATE|DELETE):{items}\\Z")


def plain_printed(
    data: str, pattern: re.Pattern[str], start: int = 6
) -> tuple[str, *tuple[str | None, ...]] | None:
    """The operation, then the column values, of change row ``data`` as printed (quoted
    ``'...'`` with ``''`` for a quote, a bare token, ``null``; None: not logged), read by
    ``pattern`` from :func:`plain_row_pattern` from ``start`` (6: after ``table ``, for a
    pattern naming labels; the label's end for one naming none); None where the row is not
    plain (the careful reader decides), among them an UPDATE that left a large value out of
    the WAL. The extraction unquotes them column by column, in Arrow
    (``gluon.source.logical_values``): no work per value here.
    """
    match = pattern.match(data, start)
    if match is None or _UNCHANGED_TOAST_TEXT in data:
        return None
    groups: tuple[str, *tuple[str | None, ...]] = match.groups()  # type: ignore[assignment]
    return groups


def printed(value: str | None) -> str | None:
    """``value`` (None: SQL NULL) as :func:`plain_printed` gives it: quoted, so a value the
    careful reader decoded joins the plain ones."""
    return None if value is None else "'" + value.replace("'", "''") + "'"


def unquote(value: str | None) -> str | None:
    """A value as :func:`plain_printed` gives it, as text (None: SQL NULL or not logged)."""
    if value is None or value == "null":
        return None
    return value[1:-1].replace("''", "'") if value[:1] == "'" else value


def plain_values(
    data: str, pattern: re.Pattern[str], start: int = 6
) -> tuple[str, list[str | None]] | None:
    """:func:`plain_printed`, each value unquoted (None: SQL NULL or not logged)."""
    read = plain_printed(data, pattern, start)
    if read is None:
        return None
    return read[0], [unquote(value) for value in read[1:]]


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
    while end < len(data) and data[end] not in ".:[ ,":
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
