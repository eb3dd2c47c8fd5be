"""Oracle's types: the data dictionary to gluon's columns, and the driver's values to Arrow.

Type table: ``ALL_TAB_COLUMNS.DATA_TYPE`` to lake type. "text" columns are
rendered by the server (``cast_to_text.sql.j2``) so nothing is lost; "UTC"
columns are read through ``SYS_EXTRACT_UTC``, cast to ``TIMESTAMP(6)`` (``extract_utc.sql.j2``:
the driver reads a TIMESTAMP described with 7-9 digits as int64 nanoseconds, which wrap
past 2262).

=========================================  =====================  ===========
Oracle type                                lake type              read
=========================================  =====================  ===========
NUMBER(p,s), 1 <= p <= 38, 0 <= s <= p     decimal(p,s)           value
NUMBER(p), NUMBER(p,0)                     decimal(p,0)           value
NUMBER(p,s), s < 0 (rounded left of .)     decimal(p-s,0)         value
  ... when p-s > 38                        string                 text
NUMBER(p,s), s > p (e.g. NUMBER(3,5))      decimal(s,s)           value
NUMBER(*,s), INTEGER (precision null)      decimal(38,s)          value
NUMBER (no precision, no scale)            string                 text
FLOAT(b) (decimal digits, up to 38)        string                 text
BINARY_FLOAT / BINARY_DOUBLE               float / double         value
DATE (has a time of day)                   timestamp_ntz          value
TIMESTAMP(n), n <= 6                       timestamp_ntz          value
TIMESTAMP(n), n = 7..9                     string                 text
TIMESTAMP(n) WITH [LOCAL] TIME ZONE, n<=6  timestamp              UTC
TIMESTAMP(n) WITH [LOCAL] TIME ZONE, 7..9  string ("...Z")        text, UTC
VARCHAR2, NVARCHAR2, CHAR, NCHAR           string                 value
CLOB, NCLOB                                string                 value
RAW, BLOB                                  binary                 value
BOOLEAN (23ai)                             boolean                value
ROWID, UROWID, INTERVAL ... (both kinds)   string                 text
LONG, LONG RAW, BFILE, XMLTYPE, JSON,      refused
object types, VARRAY, nested tables
=========================================  =====================  ===========

Zoned timestamps keep the exact instant, normalised to UTC: the original zone
or offset is not kept (Spark's ``timestamp`` has none). They are converted in
the server because python-oracledb returns them as naive datetimes (the zone
dropped); WITH LOCAL TIME ZONE values go through the session's zone, exactly. Text-read numbers use
the text-minimum format: canonical (Oracle stores no trailing zeros), '.' as
the separator, scientific notation only past 64 characters (still exact).
Nanosecond timestamps are text because Arrow's ``us`` unit would drop digits.
A NUMBER without precision holds any scale, so no decimal(p,s) holds it: it is canonical
text, as a key too (the same expression reads the table and the changelog, so a key's
changes meet its row exactly; the lake type is fixed at offload, before a key is chosen).
Fixed-point ("decimal") columns are read as ``CAST(c AS NUMBER(p,s))`` at their lake
precision (``exact_number.sql.j2``): python-oracledb's Arrow fetch gives decimal128 only
for a described precision of 1..38 and DOUBLE for a plain NUMBER, which is what the
changelog stores (see :func:`fetched_arrow_type`).

Driver values: SQLAlchemy's oracledb dialect installs a connection-level
outputtypehandler that, for plain-text statements (``coerce_to_decimal=True``),
returns NUMBER(p,s>0) as ``Decimal`` and NUMBER(p,0) as ``int`` but sends
negative-scale NUMBER and FLOAT(b) through binary floats, and fetches LOBs into
a buffer of a fixed "magic" size. :func:`output_type_handler`, installed on
connect in front of SQLAlchemy's, returns every NUMBER with a scale as
``Decimal`` and CLOB/NCLOB/BLOB inline as ``str``/``bytes`` (python-oracledb's
documented LONG / LONG RAW handler; up to 1 GB per value), never LOB locators.
``oracledb.defaults.fetch_lobs`` would do the same for LOBs but is process-wide.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import oracledb

from gluon.naming import TableRef
from gluon.schema import MAX_DECIMAL_PRECISION, Column, TableSpec, decimal_type
from gluon.source.base import (
    SourceDialect,
)

if TYPE_CHECKING:
    import pyarrow as pa

# DATA_TYPE (lengths and precisions removed) -> lake type, for types read as they are.
TYPE_MAP: dict[str, str] = {
    "BINARY_FLOAT": "float",
    "BINARY_DOUBLE": "double",
    "DATE": "timestamp_ntz",
    "VARCHAR2": "string",
    "NVARCHAR2": "string",
    "CHAR": "string",
    "NCHAR": "string",
    "CLOB": "string",
    "NCLOB": "string",
    "RAW": "binary",
    "BLOB": "binary",
    "BOOLEAN": "boolean",
}

# DATA_TYPE values rendered as text by the server.
TEXT_TYPES: frozenset[str] = frozenset(
    {"FLOAT", "ROWID", "UROWID", "INTERVAL DAY TO SECOND", "INTERVAL YEAR TO MONTH"}
)

# TIMESTAMP kinds -> lake type while the fraction fits in microseconds.
TIMESTAMP_TYPES: dict[str, str] = {
    "TIMESTAMP": "timestamp_ntz",
    "TIMESTAMP WITH TIME ZONE": "timestamp",
    "TIMESTAMP WITH LOCAL TIME ZONE": "timestamp",
}
MAX_EXACT_FRACTION = 6
"""Fractional digits Arrow's ``us`` timestamps (and Python datetimes) keep."""

# Types whose declared length is shown in ``Column.source_type``.
_CHARACTER_TYPES = frozenset({"VARCHAR2", "CHAR", "NVARCHAR2", "NCHAR"})
_PARENTHESES = re.compile(r"\(\d+\)")
_FRACTION = re.compile(r"^TIMESTAMP\((\d)\)")

Row = Mapping[str, Any]


def lower_keys(row: Row) -> dict[str, Any]:
    """Dictionary rows come upper case from Oracle, lower case through SQLAlchemy."""
    return {key.lower(): value for key, value in row.items()}


def _number_lake_type(precision: int | None, scale: int | None) -> str | None:
    """decimal(p,s) holding every value of NUMBER(precision, scale); None: read as text."""
    if scale is None:
        return None  # NUMBER without precision: up to 38 digits at any scale
    digits = MAX_DECIMAL_PRECISION if precision is None else precision
    if scale < 0:
        digits, scale = digits - scale, 0
    digits = max(digits, scale)
    return decimal_type(digits, scale) if digits <= MAX_DECIMAL_PRECISION else None


def declared_type(row: Row) -> str:
    """The column's type as a person would declare it, e.g. ``NUMBER(12,2)``."""
    values = lower_keys(row)
    data_type: str = values["data_type"]
    precision, scale = values.get("data_precision"), values.get("data_scale")
    if data_type == "NUMBER":
        if precision is None:
            return "NUMBER" if scale is None else f"NUMBER(*,{scale})"
        return f"NUMBER({precision})" if not scale else f"NUMBER({precision},{scale})"
    if data_type == "FLOAT" and precision is not None:
        return f"FLOAT({precision})"
    if data_type in _CHARACTER_TYPES:
        if data_type.startswith("N") or values.get("char_used") == "C":
            unit = "" if data_type.startswith("N") else " CHAR"
            return f"{data_type}({values.get('char_length')}{unit})"
        return f"{data_type}({values.get('data_length')})"
    if data_type == "RAW":
        return f"RAW({values.get('data_length')})"
    owner = values.get("data_type_owner")
    return f"{owner}.{data_type}" if owner else data_type


def column_from_dictionary(row: Row) -> Column | None:
    """Map one ``describe_columns`` row (ALL_TAB_COLUMNS) to a Column; None when refused."""
    values = lower_keys(row)
    name: str = values["column_name"]
    data_type: str = values["data_type"]
    nullable = values.get("nullable", "Y") != "N"
    declared = declared_type(values)
    if values.get("data_type_owner"):
        return None  # object types, XMLTYPE, VARRAY and nested table types
    kind = _PARENTHESES.sub("", data_type).strip()
    if kind == "NUMBER":
        lake = _number_lake_type(values.get("data_precision"), values.get("data_scale"))
        if lake is None:
            return Column(name, declared, "string", nullable, read_as_text=True)
        return Column(name, declared, lake, nullable)
    if kind in TIMESTAMP_TYPES:
        match = _FRACTION.match(data_type)
        fraction = int(match.group(1)) if match else int(values.get("data_scale") or 6)
        if fraction > MAX_EXACT_FRACTION:
            return Column(name, declared, "string", nullable, read_as_text=True)
        return Column(name, declared, TIMESTAMP_TYPES[kind], nullable)
    if kind in TYPE_MAP:
        return Column(name, declared, TYPE_MAP[kind], nullable)
    if kind in TEXT_TYPES:
        return Column(name, declared, "string", nullable, read_as_text=True)
    return None


def table_spec_from_dictionary(
    table: Row,
    columns: Iterable[Row],
    primary_key: Iterable[Row] = (),
    partitioning: Iterable[Row] = (),
) -> TableSpec:
    """Build a TableSpec from the rows of the dictionary templates.

    Args:
        table: the ``find_table`` row (owner, name, DEPENDENCIES, PARTITIONED).
        columns: ``describe_columns`` rows in COLUMN_ID order.
        primary_key: ``primary_key`` rows in POSITION order.
        partitioning: ``partitioning`` rows in COLUMN_POSITION order.

    Raises:
        UnsupportedError: a column type gluon cannot offload without loss.
    """
    found = lower_keys(table)
    schema, name = found["table_schema"], found["table_name"]
    mapped: list[Column] = []
    refused: list[tuple[str, str]] = []
    for row in columns:
        column = column_from_dictionary(row)
        if column is None:
            refused.append((lower_keys(row)["column_name"], declared_type(row)))
        else:
            mapped.append(column)
    SourceDialect._refuse_types(TableRef(schema, name), refused)
    parts = [lower_keys(row) for row in partitioning]
    return TableSpec(
        schema=schema,
        name=name,
        columns=tuple(mapped),
        primary_key=tuple(lower_keys(row)["column_name"] for row in primary_key),
        partition_columns=tuple(part["column_name"] for part in parts if part["column_name"]),
        partition_kind=parts[0]["partitioning_type"] if parts else None,
        # ORA_ROWSCN is per row only with ROWDEPENDENCIES; otherwise per block.
        options={"rowdependencies": found.get("dependencies") or "DISABLED"},
    )


def fetched_arrow_type(precision: int, scale: int) -> pa.DataType:
    """The Arrow type python-oracledb's data frame fetch with ``fetch_decimals=True`` gives a
    NUMBER column described with ``precision`` and ``scale``.

    python-oracledb >= 3.4 (``OracleMetadata`` arrow type): decimal128(p,s) when the
    precision is 1..38, binary DOUBLE otherwise: a plain NUMBER describes as precision 0
    (scale -127), so a changelog column widened to NUMBER would arrive as DOUBLE, which
    :func:`gluon.source.arrow.cast_exactly` refuses; :meth:`OracleSource.select_list` casts
    every fixed-point column to its lake precision so the described precision is never 0.
    """
    import pyarrow as pa

    if 0 < precision <= MAX_DECIMAL_PRECISION:
        return pa.decimal128(precision, scale)
    return pa.float64()


Handler = Callable[..., Any]

# LOB columns fetched inline as str / bytes (python-oracledb's documented handler), not
# as LOB locators that need a round trip each.
_INLINE_LOBS: dict[Any, Any] = {
    oracledb.DB_TYPE_CLOB: oracledb.DB_TYPE_LONG,
    oracledb.DB_TYPE_NCLOB: oracledb.DB_TYPE_LONG_NVARCHAR,
    oracledb.DB_TYPE_BLOB: oracledb.DB_TYPE_LONG_RAW,
}
_BINARY_FLOATS = (oracledb.DB_TYPE_BINARY_FLOAT, oracledb.DB_TYPE_BINARY_DOUBLE)


def output_type_handler(fallback: Handler | None) -> Handler:
    """An oracledb outputtypehandler that returns every value exactly; wraps ``fallback``.

    - NUMBER with a precision and a non-zero scale (negative scales, FLOAT(b)) as
      ``Decimal``: SQLAlchemy's handler sends those through binary floats.
    - BINARY_FLOAT / BINARY_DOUBLE as ``float`` (SQLAlchemy may detect them as numbers).
    - CLOB / NCLOB as ``str``, BLOB as ``bytes`` (up to 1 GB each).

    Anything else goes to ``fallback`` (SQLAlchemy's handler): NUMBER(p,0) as ``int``,
    NUMBER(p,s>0) as ``Decimal``, unconstrained NUMBER detected exactly from its text.
    """

    def handler(
        cursor: Any, name: str, default_type: Any, size: int, precision: int, scale: int
    ) -> Any:
        if default_type is oracledb.DB_TYPE_NUMBER and precision and scale != 0:
            return cursor.var(decimal.Decimal, arraysize=cursor.arraysize)
        if default_type in _BINARY_FLOATS:
            return cursor.var(default_type, arraysize=cursor.arraysize)
        if default_type in _INLINE_LOBS:
            return cursor.var(_INLINE_LOBS[default_type], arraysize=cursor.arraysize)
        if fallback is None:
            return None
        return fallback(cursor, name, default_type, size, precision, scale)

    return handler


def install_output_type_handler(dbapi_connection: Any, _record: Any) -> None:
    # Runs after SQLAlchemy's own on-connect hook, so it wraps SQLAlchemy's handler.
    dbapi_connection.outputtypehandler = output_type_handler(dbapi_connection.outputtypehandler)
