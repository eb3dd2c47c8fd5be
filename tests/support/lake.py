"""Read an offloaded table back from the lake and compare it with its source rows.

Values from the three places a test reads them (the source through
SQLAlchemy, ``gluon query --json``, and the Python API's Arrow result) come in
different Python shapes: JSON carries decimals as strings, times as ISO 8601
and binary data as base64. :func:`canonical` turns each into one canonical
value per *kind*, so a table can be compared value for value::

    columns = {"id": "int", "price": "decimal", "sold_at": "timestamp_utc"}
    assert canonical_rows(json_rows, columns) == canonical_rows(source_rows, columns)
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from support.cli import query_json

__all__ = [
    "KINDS",
    "LakeColumn",
    "arrow_rows",
    "assert_arrow_schema",
    "assert_lake_matches",
    "canonical",
    "canonical_rows",
    "delta_partitions",
    "delta_version",
    "diff_rows",
    "lake_table_dir",
    "read_arrow",
]

KINDS = (
    "int",
    "float32",
    "float64",
    "bool",
    "decimal",
    "text",
    "date",
    "timestamp_ntz",
    "timestamp_utc",
    "binary",
    "number_text",
)


def _float_text(value: float) -> str:
    # repr keeps every bit of a double and makes NaN equal to NaN.
    return "nan" if math.isnan(value) else repr(value)


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise TypeError(f"a boolean where a number belongs: {value!r}")
    return float(value)  # JSON renders non-finite floats as 'inf', '-inf', 'nan'


def canonical(kind: str, value: Any) -> Any:
    """The canonical form of one value of ``kind`` (see the module docstring)."""
    if value is None:
        return None
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"not an integer: {value!r}")
        return value
    if kind == "float64":
        return _float_text(_float(value))
    if kind == "float32":
        single = struct.unpack("<f", struct.pack("<f", _float(value)))[0]
        return _float_text(single)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if value in (0, 1):  # SQLite keeps booleans as 0/1
            return bool(value)
        raise TypeError(f"not a boolean: {value!r}")
    if kind == "decimal":
        if isinstance(value, float):
            # SQLite keeps NUMERIC(p,s) values as REAL; repr is the shortest exact text.
            return decimal.Decimal(repr(value))
        if isinstance(value, decimal.Decimal | int | str):
            return decimal.Decimal(value)
        raise TypeError(f"not a decimal: {value!r}")
    if kind == "text":
        if not isinstance(value, str):
            raise TypeError(f"not text: {value!r}")
        return value
    if kind == "date":
        if isinstance(value, str):
            return dt.date.fromisoformat(value)
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise TypeError(f"not a date: {value!r}")
        return value
    if kind == "timestamp_ntz":
        stamp = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
        if not isinstance(stamp, dt.datetime) or stamp.tzinfo is not None:
            raise TypeError(f"not a naive timestamp: {value!r}")
        return stamp
    if kind == "timestamp_utc":
        stamp = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
        if not isinstance(stamp, dt.datetime):
            raise TypeError(f"not a timestamp: {value!r}")
        # The lake session's time zone is UTC: a naive instant read back is a UTC one.
        aware = stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)
        return aware.astimezone(dt.UTC)
    if kind == "binary":
        if isinstance(value, str):  # gluon query --json renders binary data as base64
            return base64.b64decode(value, validate=True)
        if isinstance(value, bytes | bytearray | memoryview):
            return bytes(value)
        raise TypeError(f"not binary data: {value!r}")
    if kind == "number_text":
        # A number the lake keeps as text (SQLite NUMERIC without a precision): the text
        # must denote exactly the source's number.
        if isinstance(value, float):
            return decimal.Decimal(repr(value))
        if isinstance(value, int | str) and not isinstance(value, bool):
            return decimal.Decimal(value)
        raise TypeError(f"not a number or its text: {value!r}")
    raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")


def canonical_rows(
    rows: Iterable[Mapping[str, Any]], kinds: Mapping[str, str]
) -> list[dict[str, Any]]:
    """Each row as ``{column: canonical value}`` over exactly the columns of ``kinds``.

    Raises:
        AssertionError: a row lacks a column of ``kinds`` or has one more.
    """
    result = []
    for row in rows:
        lowered = {key.lower(): value for key, value in row.items()}
        assert sorted(lowered) == sorted(kinds), f"columns differ: {sorted(lowered)}"
        result.append({name: canonical(kind, lowered[name]) for name, kind in kinds.items()})
    return result


def arrow_rows(table: pa.Table) -> list[dict[str, Any]]:
    """An Arrow table's rows as dictionaries."""
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def lake_table_dir(home: Path, schema: str, table: str) -> Path:
    """Where the base table of ``schema.table`` is now (the repository records it; if
    an older gluon moved it on reset or compaction), else where a first offload puts it.

    Reads the default repository under ``home`` directly, and only if it exists: no
    settings are loaded (a test may have broken them on purpose) and nothing is created.
    """
    from gluon.repo import Repository

    first = home / "lake" / f"{schema.lower()}.db" / f"{table.lower()}_data"
    repo_db = home / "repo" / "gluon.db"
    if not repo_db.exists():
        return first
    record = Repository(f"sqlite:///{repo_db}").get_table(f"{schema}.{table}".upper())
    return Path(record.base_path) if record is not None else first


def delta_version(path: Path) -> int:
    """The latest version of the Delta table at ``path``."""
    from deltalake import DeltaTable

    return int(DeltaTable(str(path)).version())


def delta_partitions(path: Path) -> list[dict[str, str | None]]:
    """The partition values of the current version's files, one dict per partition."""
    from deltalake import DeltaTable

    partitions: Sequence[Mapping[str, str | None]] = DeltaTable(str(path)).partitions()
    return [dict(partition) for partition in partitions]


@dataclass(frozen=True)
class LakeColumn:
    """One column of a test table: its source declaration and what the lake must hold.

    Attributes:
        name: the column name (lower case, as the lake shows it).
        declared: the type in the source's CREATE TABLE.
        arrow: the Arrow type a lake query returns for it.
        kind: how to compare values (one of :data:`KINDS`).
        source_expression: what to select in the source for the expected value
            (default: the column itself), e.g. ``c_uuid::text``.
    """

    name: str
    declared: str
    arrow: pa.DataType
    kind: str
    source_expression: str | None = None

    @property
    def select(self) -> str:
        """The source select-list item that yields the expected value."""
        if self.source_expression is None:
            return self.name
        return f"{self.source_expression} AS {self.name}"


def read_arrow(statement: str) -> pa.Table:
    """Run ``statement`` through the Python API (``gluon.read.catalog.lake_session``)."""
    from gluon.config import load_settings
    from gluon.read.catalog import lake_session

    with lake_session(load_settings()) as session:
        table: pa.Table = session.sql(statement).toArrow()
    return table


def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    if pa.types.is_timestamp(actual) and pa.types.is_timestamp(expected):
        utc = {"UTC", "Etc/UTC", "+00:00"}
        same_zone = (actual.tz is None) == (expected.tz is None) and (
            actual.tz is None or (actual.tz in utc and expected.tz in utc)
        )
        return bool(actual.unit == expected.unit and same_zone)
    if pa.types.is_large_string(actual):
        actual = pa.string()
    if pa.types.is_large_binary(actual):
        actual = pa.binary()
    return bool(actual.equals(expected))


def assert_arrow_schema(table: pa.Table, columns: Sequence[LakeColumn]) -> None:
    """``table`` has exactly ``columns``, in order, with their Arrow types."""
    assert table.column_names == [column.name for column in columns]
    wrong = [
        f"{column.name}: {field.type} (expected {column.arrow})"
        for column, field in zip(columns, table.schema, strict=True)
        if not _same_type(field.type, column.arrow)
    ]
    assert not wrong, "lake column types differ: " + "; ".join(wrong)


def diff_rows(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]], key: str = "id"
) -> list[str]:
    """Readable differences between two row lists matched on ``key`` (empty: equal)."""
    problems = []
    by_key = {row[key]: row for row in actual}
    if len(by_key) != len(actual):
        problems.append(f"duplicate {key} values in the lake rows")
    for row in expected:
        other = by_key.pop(row[key], None)
        if other is None:
            problems.append(f"{key}={row[key]!r}: missing from the lake")
            continue
        for column, value in row.items():
            if other.get(column) != value:
                problems.append(
                    f"{key}={row[key]!r} {column}: source {value!r} != lake {other.get(column)!r}"
                )
    problems.extend(f"{key}={extra!r}: only in the lake" for extra in by_key)
    return problems


def assert_lake_matches(
    view: str, source_rows: Sequence[Mapping[str, Any]], columns: Sequence[LakeColumn]
) -> None:
    """``SELECT * FROM view`` read with ``gluon query --json`` and with the Python API
    both equal ``source_rows`` value for value (rows matched on ``id``)."""
    kinds = {column.name: column.kind for column in columns}
    expected = canonical_rows(source_rows, kinds)
    statement = f"SELECT * FROM {view}"

    json_rows = query_json(statement)
    for row in json_rows:
        assert list(row) == list(kinds), f"gluon query --json column order: {list(row)}"
    problems = diff_rows(expected, canonical_rows(json_rows, kinds))
    assert not problems, "gluon query --json differs from the source:\n" + "\n".join(problems)

    table = read_arrow(statement)
    assert_arrow_schema(table, columns)
    problems = diff_rows(expected, canonical_rows(arrow_rows(table), kinds))
    assert not problems, "the Python API differs from the source:\n" + "\n".join(problems)
