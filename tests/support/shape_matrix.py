"""Run one case of the table-shape matrix and compare the lake with the source, value
for value (see support/shapes.py for the shapes and the draw).

The source is read on its own (psycopg or sqlite3, never through gluon); the lake
without gluon's view code where possible: the base Delta table with ``deltalake``
(IMMEDIATE after every extraction, every mode after compaction), the DEFERRED user
view through ``gluon.read.catalog.lake_session`` (Arrow, no JSON rendering in between).

Values are compared in a canonical form per column *kind* (:func:`canonical`) that
keeps every difference a user could see: a decimal's scale, NaN and the infinities,
the instant of a timestamp with time zone (UTC), a time zone's offset, bytes, JSON by
its parsed structure (numbers by value), interval text as the server prints it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import ipaddress
import json
import math
import sqlite3
import struct
import uuid
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.string import TextLoader
from typer.testing import Result

from support.shapes import INSERT_ONLY, Case, Col, Shape, quote, rounds_for

__all__ = ["KINDS", "CaseRun", "SourceDb", "canonical", "run_case"]

RunCli = Callable[..., Result]
Row = tuple[object, ...]


# ---------------------------------------------------------------------------
# Canonical values
# ---------------------------------------------------------------------------


def _float(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a float: {value!r}")
    number = float(value)
    return "nan" if math.isnan(number) else repr(number)


def _float32(value: Any) -> str:
    return _float(struct.unpack("<f", struct.pack("<f", float(value)))[0])


def _decimal(scale: int | None, value: Any) -> str:
    """Decimal text with the scale the value carries (PostgreSQL, the lake); SQLite's
    REAL/INTEGER storage carries none, so its value is written at the column's scale when
    that is exact, and left as it is (to differ) when it is not."""
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a decimal: {value!r}")
    number = decimal.Decimal(repr(value)) if isinstance(value, float) else decimal.Decimal(value)
    if scale is not None:
        fixed = number.quantize(decimal.Decimal(1).scaleb(-scale))
        if fixed == number:
            number = fixed
    return format(number, "f")


def _number_text(value: Any) -> str:
    """A number the lake keeps as text (PostgreSQL numeric without precision: NaN,
    infinities, any scale): the source's Decimal as PostgreSQL prints it."""
    if isinstance(value, str):
        return value
    if isinstance(value, decimal.Decimal):
        if value.is_infinite():
            return "Infinity" if value > 0 else "-Infinity"
        return format(value, "f")
    raise TypeError(f"not a number or its text: {value!r}")


def _timestamp_utc(value: Any) -> str:
    if not isinstance(value, dt.datetime):
        raise TypeError(f"not a timestamp: {value!r}")
    aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)  # the lake's zone is UTC
    return aware.astimezone(dt.UTC).isoformat()


def _timestamp(value: Any) -> str:
    if isinstance(value, str):  # SQLite keeps DATETIME as text
        value = dt.datetime.fromisoformat(value)
    if not isinstance(value, dt.datetime) or value.tzinfo is not None:
        raise TypeError(f"not a naive timestamp: {value!r}")
    return value.isoformat()


def _date(value: Any) -> str:
    if isinstance(value, str):
        value = dt.date.fromisoformat(value)
    if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
        raise TypeError(f"not a date: {value!r}")
    return value.isoformat()


def _binary(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"not binary data: {value!r}")


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"not text: {value!r}")
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"not an integer: {value!r}")
    return value


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in (0, 1):  # SQLite keeps booleans as 0/1
        return bool(value)
    raise TypeError(f"not a boolean: {value!r}")


def _uuid(value: Any) -> str:
    return str(value if isinstance(value, uuid.UUID) else uuid.UUID(_text(value)))


def _json_structure(value: Any) -> object:
    if isinstance(value, dict):
        return ("object", tuple(sorted((key, _json_structure(v)) for key, v in value.items())))
    if isinstance(value, list):
        return ("array", tuple(_json_structure(v) for v in value))
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, decimal.Decimal | int):
        # By value, as a JSON reader sees it: 2e3 is 2000 (jsonb and the changelog
        # triggers' to_jsonb rewrite the number; the value stays).
        return ("number", str(decimal.Decimal(value).normalize()))
    return value


def _json(value: Any) -> object:
    """JSON by structure (object keys unordered), numbers by value; both
    sides arrive as text (psycopg's json loader would turn 1.50 into 1.5), except a bare
    number SQLite's NUMERIC affinity (a column declared JSON) stored as a number."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = repr(value)
    return _json_structure(json.loads(_text(value), parse_float=decimal.Decimal))


def _inet(value: Any) -> str:
    return str(ipaddress.ip_interface(str(value)))


def _cidr(value: Any) -> str:
    return str(ipaddress.ip_network(str(value)))


def _time(value: Any) -> str:
    if isinstance(value, str):
        value = dt.time.fromisoformat(value)
    if not isinstance(value, dt.time) or value.tzinfo is not None:
        raise TypeError(f"not a time of day: {value!r}")
    return value.isoformat()


def _timetz(value: Any) -> tuple[str, object]:
    """Time of day and offset apart: 12:00+01 and 11:00+00 differ in PostgreSQL."""
    if isinstance(value, str):
        value = dt.time.fromisoformat(value)
    if not isinstance(value, dt.time) or value.tzinfo is None:
        raise TypeError(f"not a time with time zone: {value!r}")
    return (value.replace(tzinfo=None).isoformat(), value.utcoffset())


KINDS: dict[str, Callable[[Any], object]] = {
    "int": _int,
    "bool": _bool,
    "float64": _float,
    "float32": _float32,
    "decimal": partial(_decimal, None),
    "decimal2": partial(_decimal, 2),
    "number_text": _number_text,
    "text": _text,
    "date": _date,
    "timestamp": _timestamp,
    "timestamp_utc": _timestamp_utc,
    "binary": _binary,
    "uuid": _uuid,
    "json": _json,
    "inet": _inet,
    "cidr": _cidr,
    "time": _time,
    "timetz": _timetz,
}
"""Kind -> canonical form. ``interval`` and enums/domains compare as text: the lake
holds the server's own rendering (psycopg's timedelta would fold a month into 30 days);
the source session pins IntervalStyle as gluon's does."""


def canonical(kind: str, value: Any) -> object:
    if value is None:
        return None
    return KINDS[kind](value)


def canonical_row(columns: Sequence[Col], values: Sequence[Any]) -> Row:
    assert len(columns) == len(values), f"{len(values)} values for {len(columns)} columns"
    return tuple(canonical(c.kind, v) for c, v in zip(columns, values, strict=True))


# ---------------------------------------------------------------------------
# The source, read on its own
# ---------------------------------------------------------------------------


class SourceDb:
    """Direct access to the source database (psycopg / sqlite3), not through gluon."""

    def __init__(self, dialect: str, url: str) -> None:
        self.dialect = dialect
        self.url = url

    def _connect(self) -> Any:
        if self.dialect == "sqlite":
            return sqlite3.connect(self.url.removeprefix("sqlite:///"))
        conn = psycopg.connect(self.url.replace("postgresql+psycopg://", "postgresql://"))
        conn.execute("SET TimeZone = 'Asia/Kolkata'")  # not UTC: instants must be converted
        conn.execute("SET IntervalStyle = postgres")
        for name in ("interval", "json", "jsonb"):  # see KINDS
            conn.adapters.register_loader(name, TextLoader)
        return conn

    def run(self, statements: Iterable[str]) -> None:
        """``statements`` in one transaction."""
        conn = self._connect()
        try:
            for statement in statements:
                conn.execute(statement)
            conn.commit()
        finally:
            conn.close()

    def rows(self, statement: str) -> list[tuple[Any, ...]]:
        conn = self._connect()
        try:
            return [tuple(row) for row in conn.execute(statement).fetchall()]
        finally:
            conn.close()


# ---------------------------------------------------------------------------
# The lake, read without gluon's views where possible
# ---------------------------------------------------------------------------


def _base_path(shape: Shape) -> str:
    from gluon.config import load_settings
    from gluon.naming import TableRef
    from gluon.repo import Repository

    record = Repository(load_settings().repo_url).get_table(TableRef(shape.schema, shape.table).key)
    assert record is not None, f"no table record for {shape.schema}.{shape.table}"
    return str(record.base_path)


def base_rows(shape: Shape) -> list[Row]:
    """The base Delta table read with deltalake (partition columns gluon adds dropped)."""
    from deltalake import DeltaTable

    from gluon.naming import lake_identifier

    table = DeltaTable(_base_path(shape)).to_pyarrow_table()
    names = [name for name in table.column_names if not name.startswith("gl_part_")]
    assert names == [lake_identifier(c.name) for c in shape.columns], names
    return [
        canonical_row(shape.columns, [row[name] for name in names])
        for row in table.select(names).to_pylist()
    ]


def view_rows(shape: Shape) -> list[Row]:
    """The user view through gluon's lake session (Arrow)."""
    from gluon.config import load_settings
    from gluon.read.catalog import lake_session

    statement = f"SELECT * FROM `{shape.schema.lower()}`.`{shape.table.lower()}`"
    with lake_session(load_settings()) as session:
        table = session.sql(statement).toArrow()
    assert table.column_names == [c.name.lower() for c in shape.columns], table.column_names
    return [canonical_row(shape.columns, list(row.values())) for row in table.to_pylist()]


def diff(shape: Shape, expected: list[Row], actual: list[Row]) -> list[str]:
    """Readable differences, rows matched on the key (empty: equal)."""
    key_at = [i for i, c in enumerate(shape.columns) if c.name in shape.key]

    def key(row: Row) -> Row:
        return tuple(row[i] for i in key_at)

    problems: list[str] = []
    by_key: dict[Row, Row] = {}
    for row in actual:
        if key(row) in by_key:
            problems.append(f"key {key(row)!r} shows twice in the lake")
        by_key[key(row)] = row
    for row in expected:
        other = by_key.pop(key(row), None)
        if other is None:
            problems.append(f"key {key(row)!r}: missing from the lake")
            continue
        for column, mine, theirs in zip(shape.columns, row, other, strict=True):
            if mine != theirs:
                problems.append(
                    f"key {key(row)!r} {column.name}: source {mine!r} != lake {theirs!r}"
                )
    problems.extend(f"key {extra!r}: only in the lake" for extra in by_key)
    return problems


# ---------------------------------------------------------------------------
# One case
# ---------------------------------------------------------------------------


SHADOW = "gl_matrix_shadow"
"""A plain table beside the source table that mirrors what UPDATABLE_INSERT inserts
through the updatable view: the rows the lake must show besides the table's."""


class CaseRun:
    def __init__(self, case: Case, url: str, run_cli: RunCli) -> None:
        self.case = case
        self.shape = case.shape
        self.db = SourceDb(self.shape.dialect, url)
        self.run_cli = run_cli
        self.through_view = case.method == "UPDATABLE_INSERT"
        self.shadow = f"{quote(self.shape.schema)}.{quote(SHADOW)}"

    def offload(self, *flags: str) -> Result:
        result = self.run_cli("offload", "-t", self.shape.typed, "-x", *flags)
        assert result.exit_code == 0, f"offload {' '.join(flags)}: {result.stderr}"
        return result

    def expected(self) -> list[Row]:
        names = ", ".join(quote(c.name) for c in self.shape.columns)
        rows = self.db.rows(f"SELECT {names} FROM {self.shape.qualified}")
        if self.through_view:
            rows += self.db.rows(f"SELECT {names} FROM {self.shadow}")
        return [canonical_row(self.shape.columns, row) for row in rows]

    def check(self, when: str, *, view: bool, base: bool) -> None:
        expected = self.expected()
        reads = [("user view", view_rows)] if view else []
        reads += [("base table", base_rows)] if base else []
        report = []
        for name, read in reads:
            problems = diff(self.shape, expected, read(self.shape))
            if problems:
                report.append(f"the {name} differs from the source:")
                report += problems[:20]
        assert not report, f"{when}: " + "\n".join(report)

    def updatable_view(self) -> str:
        from gluon.config import load_settings
        from gluon.methods.base import SourceObject
        from gluon.naming import TableRef
        from gluon.repo import Repository

        key = TableRef(self.shape.schema, self.shape.table).key
        state = Repository(load_settings().repo_url).incremental.get_state(key)
        assert state is not None
        view = next(o for o in state.source_objects if o.kind == SourceObject.UPDATABLE_VIEW.value)
        return f"{quote(view.schema)}.{quote(view.name)}"

    def rewrite(self, statements: list[str], view: str) -> list[str]:
        """UPDATABLE_INSERT inserts through the updatable view, mirrored in the shadow."""
        if not self.through_view:
            return statements
        prefix = f"INSERT INTO {self.shape.qualified} "
        rewritten = []
        for statement in statements:
            assert statement.startswith(prefix), f"not an insert: {statement}"
            rest = statement.removeprefix(prefix)
            rewritten += [f"INSERT INTO {view} {rest}", f"INSERT INTO {self.shadow} {rest}"]
        return rewritten

    def run(self) -> None:
        shape, case = self.shape, self.case
        self.db.run(shape.create())
        if self.through_view:
            self.db.run(
                [f"CREATE TABLE {self.shadow} AS SELECT * FROM {shape.qualified} WHERE 1 = 0"]
            )
        self.offload(
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={case.method}",
            f"--incremental-merge-mode={case.mode}",
            # PG_LOGICAL's slot said either way: the default (a member) would make the own-slot
            # cases members too.
            *(
                (f"--incremental-pg-logical-slot={case.slot_scope}",)
                if case.method == "PG_LOGICAL"
                else ()
            ),
            *shape.enable_flags,
        )
        immediate = case.mode == "IMMEDIATE"
        self.check("after enable", view=not immediate, base=immediate)
        view = self.updatable_view() if self.through_view else ""
        for round_ in rounds_for(shape, case.method):
            for transaction in round_.transactions(shape):
                self.db.run(self.rewrite(transaction, view))
            self.offload("--incremental-run-extraction")
            self.check(f"after {round_.name}", view=not immediate, base=immediate)
        if not immediate:
            self.offload("--incremental-run-compaction", "--incremental-wait-time=0")
            self.check("after compaction", view=True, base=True)


def run_case(case: Case, url: str, run_cli: RunCli) -> None:
    """Create the shape in the source at ``url``, enable, run its rounds, compare."""
    assert case.method not in INSERT_ONLY or any(
        r.inserts_only for r in rounds_for(case.shape, case.method)
    )
    CaseRun(case, url, run_cli).run()


def sqlite_url(directory: Path) -> str:
    return f"sqlite:///{directory / 'source.db'}"
