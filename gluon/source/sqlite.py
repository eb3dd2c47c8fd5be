"""SQLite: schemas are attached database names (``main`` for the main file).

SQLite has no schemas for hybrid objects, so incremental objects live beside
the table with a ``<SCHEMA>_H_`` prefix. Types follow SQLite's affinity rules;
columns whose declared type gives no exact lake type are refused.

Reads keep the per-value converters of ``gluon/source/arrow.py`` rather than
the ADBC SQLite driver's Arrow path. That driver fixes each column's Arrow type
from the first batch of rows and handles a later value of another storage class
by SQLite's own conversions or not at all: a nullable REAL column whose first
rows are NULL becomes int64 and the read then fails ("Type mismatch ... expected
INT64 but got DOUBLE"); a REAL in a text column (JSON, NUMERIC without a
precision) becomes SQLite's 15-digit text, not the exact shortest form the
converters give; a BLOB in a text column turns the column binary instead of
being refused. Dynamic typing makes those shapes legal data, so the exact
guarantees win over speed here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import hashlib
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import sqlalchemy as sa

from gluon.config import SourceTimeouts
from gluon.errors import NotFoundError, SourceError, UnsupportedError
from gluon.naming import TableRef
from gluon.schema import MAX_DECIMAL_PRECISION, Column, TableSpec, decimal_type
from gluon.source.base import SourceDialect

NO_LIMIT_SECONDS = 1e6
"""The busy timeout for GLUON_SOURCE_LOCK_TIMEOUT=0 (sqlite3 takes no "forever")."""

_PRECISION = re.compile(r"\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)")

# Declared type names with an exact lake type (checked before the affinity rules).
NAMED_TYPES: dict[str, str] = {
    "BOOLEAN": "boolean",
    "BOOL": "boolean",
    "DATE": "date",
    "DATETIME": "timestamp_ntz",
    "TIMESTAMP": "timestamp_ntz",
    "JSON": "string",
}

# SQLite's affinity rules, in the order SQLite applies them (substring match).
AFFINITY_RULES: tuple[tuple[str, str], ...] = (
    ("INT", "bigint"),
    ("CHAR", "string"),
    ("CLOB", "string"),
    ("TEXT", "string"),
    ("BLOB", "binary"),
    ("REAL", "double"),
    ("FLOA", "double"),
    ("DOUB", "double"),
)


class SQLiteSource(SourceDialect):
    name = "sqlite"
    max_identifier_length: ClassVar[int | None] = None
    has_schemas = False
    name_case = "lower"
    trigger_per_event = True  # templates/sqlite/_capture.sql.j2, trigger_name(event)
    # The changelog's INTEGER PRIMARY KEY AUTOINCREMENT is its sequence.
    implicit_source_objects = frozenset({"changelog_sequence"})

    @classmethod
    def engine_options(cls) -> dict[str, Any]:
        # Writers in other processes (the application, the demo) may hold the file briefly.
        return {"connect_args": {"timeout": 30}}

    @classmethod
    def timeout_connect_args(cls, url: sa.URL, timeouts: SourceTimeouts) -> dict[str, Any]:
        # A local file: the only wait is for another process's write lock (the busy timeout).
        return {"timeout": timeouts.lock_seconds or NO_LIMIT_SECONDS}

    def may_hold_null(self, spec: TableSpec, column: str) -> bool:
        """A lone INTEGER PRIMARY KEY is the rowid (never NULL: SQLite assigns one), however
        it is declared; any other column allows NULL unless declared NOT NULL, a primary key
        column of a rowid table too."""
        found = spec.column(column)
        rowid = spec.primary_key == (found.name,) and found.source_type.strip().upper() == "INTEGER"
        return found.nullable and not rowid

    def begin_script(self, connection: sa.Connection) -> None:
        # pysqlite opens a transaction only before DML, so DDL would commit one by one.
        connection.exec_driver_sql("BEGIN")

    def lake_type(self, declared: str) -> str | None:
        """The lake type for a declared SQLite column type, or None when there is none."""
        upper = declared.upper().strip()
        base = _PRECISION.sub("", upper).strip()
        if base in NAMED_TYPES:
            return NAMED_TYPES[base]
        for fragment, lake in AFFINITY_RULES:
            if fragment in base:
                return lake
        if base in ("NUMERIC", "DECIMAL"):
            match = _PRECISION.search(upper)
            if match and int(match.group(1)) <= MAX_DECIMAL_PRECISION:
                return decimal_type(int(match.group(1)), int(match.group(2) or 0))
            # Without a precision SQLite keeps integers or reals: text keeps them exact.
            return "string"
        return None

    def adapt_params(self, params: dict[str, Any]) -> dict[str, Any]:
        # sqlite3 binds no Decimal; as text, SQLite compares it numerically with numeric columns.
        # Dates and times are stored as ISO text, so they compare as the same text.
        return {key: _sqlite_value(value) for key, value in params.items()}

    def _schemas(self) -> list[str]:
        return [row[1] for row in self.run_query("list_databases")]

    def _schema_exists(self, schema: str) -> bool:
        return True  # describe_table names a missing database itself, with the attached ones

    def describe_table(self, ref: TableRef) -> TableSpec:
        schemas = {name.lower(): name for name in self._schemas()}
        schema = schemas.get(ref.schema.lower())
        if schema is None:
            raise NotFoundError(
                f"table {ref} does not exist: SQLite source has no database {ref.schema!r} "
                f"(attached: {', '.join(schemas.values())}; the main file is 'main')"
            )
        found = self.run_query("find_table", {"table": ref.table}, schema=schema)
        self._require_found(ref, bool(found))
        table = found[0][0]
        rows = self.run_query("describe_columns", {"table": table, "schema": schema})
        return self._table_spec(ref, schema, table, rows)

    def _table_spec(self, ref: TableRef, schema: str, table: str, rows: Sequence[Any]) -> TableSpec:
        """The spec of ``schema.table`` from its ``describe_columns`` rows.

        Raises:
            UnsupportedError: a column type gluon cannot offload without loss.
        """
        columns: list[Column] = []
        refused: list[tuple[str, str]] = []
        primary: list[tuple[int, str]] = []
        for row in rows:
            name, declared, notnull, pk = row.name, row.type or "", bool(row.notnull), row.pk
            lake = self.lake_type(declared)
            if lake is None:
                refused.append((name, declared or "no declared type"))
                continue
            columns.append(Column(name, declared or "", lake, nullable=not notnull))
            if pk:
                primary.append((int(pk), name))
        self._refuse_types(ref, refused)
        return TableSpec(
            schema=schema,
            name=table,
            columns=tuple(columns),
            primary_key=tuple(name for _, name in sorted(primary)),
        )

    def _describe_together(self, refs: Sequence[TableRef]) -> dict[TableRef, TableSpec]:
        """One query per attached database holding some of ``refs``."""
        schemas = {name.lower(): name for name in self._schemas()}
        wanted: dict[str, list[TableRef]] = {}
        for ref in refs:
            if ref.schema.lower() in schemas:
                wanted.setdefault(schemas[ref.schema.lower()], []).append(ref)
        described: dict[TableRef, TableSpec] = {}
        for schema, among in wanted.items():
            params: dict[str, Any] = {f"t{n}": ref.table for n, ref in enumerate(among)}
            rows = self.run_query(
                "describe_tables", {**params, "schema": schema}, schema=schema, tables=among
            )
            tables: dict[str, list[Any]] = {}
            for row in rows:
                tables.setdefault(row.table_name.lower(), []).append(row)
            for ref in among:
                columns = tables.get(ref.table.lower())
                if not columns:
                    continue  # missing: describe_table says so
                with contextlib.suppress(UnsupportedError):  # described alone, refused again
                    described[ref] = self._table_spec(ref, schema, columns[0].table_name, columns)
        return described

    def prepare_checksums(self) -> None:
        # SQLite has no MD5: gluon verify's templates call these, registered per connection.
        if not sa.event.contains(self.engine, "connect", _register_checksum_functions):
            sa.event.listen(self.engine, "connect", _register_checksum_functions)
            self.engine.dispose()  # pooled connections opened before lack the functions

    def check_connection(self) -> None:
        database = self.engine.url.database
        if database and database != ":memory:" and not Path(database).is_file():
            raise SourceError(
                f"the SQLite source database {database} does not exist (check GLUON_SOURCE_URL)"
            )
        super().check_connection()


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


__all__ = ["SQLiteSource"]


_HASH_SUM_DIGITS = 15
"""Hex digits of each row's MD5 that verify's checksum adds (as _verify_hash.sql.j2's)."""


def _register_checksum_functions(connection: Any, _record: Any) -> None:
    connection.create_function("gluon_md5", 1, _md5_hex, deterministic=True)
    connection.create_aggregate("gluon_hash_sum", 1, _HashSum)
    connection.create_function("gluon_float_text", 1, _float_text, deterministic=True)


def _md5_hex(text: str | bytes | None) -> str | None:
    if text is None:
        return None
    data = text if isinstance(text, bytes) else str(text).encode("utf-8")
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


class _HashSum:
    """The sum of the first 15 hex digits (60 bits) of MD5s, as text: the sum of a big
    table's would overflow SQLite's 64-bit integers."""

    def __init__(self) -> None:
        self.total = 0

    def step(self, hexdigest: str | None) -> None:
        if hexdigest is not None:
            self.total += int(hexdigest[:_HASH_SUM_DIGITS], 16)

    def finalize(self) -> str:
        return str(self.total)


def _float_text(value: float | int | str | bytes | None) -> str | None:
    """A REAL as its shortest exact text, written as the lake writes a double."""
    if value is None or isinstance(value, str | bytes):
        return None if value is None else str(value)
    number = float(value)
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return "NaN" if math.isnan(number) else repr(number)
