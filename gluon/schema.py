"""Table and column descriptions shared by the source layer, the lake and the repository.

Lake types are Spark SQL type names (``bigint``, ``decimal(12,2)``,
``timestamp_ntz``...). Each maps to exactly one Arrow type, which is what
travels from the source to the lake.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING

from gluon.naming import lake_identifier

if TYPE_CHECKING:
    import pyarrow as pa

_DECIMAL = re.compile(r"^decimal\((\d+),(-?\d+)\)$")

LAKE_TYPES = frozenset(
    {
        "boolean",
        "tinyint",
        "smallint",
        "int",
        "bigint",
        "float",
        "double",
        "string",
        "binary",
        "date",
        "timestamp_ntz",
        "timestamp",
    }
)
"""The lake types besides ``decimal(p,s)``: the keys of :func:`_arrow_types`."""
MAX_DECIMAL_PRECISION = 38


@cache
def _arrow_types() -> dict[str, pa.DataType]:
    # Built at first use: pyarrow is imported only by commands that move rows.
    import pyarrow as pa

    return {
        "boolean": pa.bool_(),
        "tinyint": pa.int8(),
        "smallint": pa.int16(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "string": pa.string(),
        "binary": pa.binary(),
        "date": pa.date32(),
        # Naive source timestamps stay naive; zoned ones become UTC instants.
        "timestamp_ntz": pa.timestamp("us"),
        "timestamp": pa.timestamp("us", tz="UTC"),
    }


def decimal_type(precision: int, scale: int) -> str:
    """The lake type for a fixed-point number."""
    return f"decimal({precision},{scale})"


def decimal_parts(lake_type: str) -> tuple[int, int] | None:
    """(precision, scale) of a ``decimal(p,s)`` lake type; None for any other type."""
    match = _DECIMAL.match(lake_type)
    return (int(match.group(1)), int(match.group(2))) if match else None


def arrow_type(lake_type: str) -> pa.DataType:
    """The Arrow type that carries values of ``lake_type``."""
    import pyarrow as pa

    match = _DECIMAL.match(lake_type)
    if match:
        return pa.decimal128(int(match.group(1)), int(match.group(2)))
    return _arrow_types()[lake_type]


def is_lake_type(lake_type: str) -> bool:
    """True for a type name :func:`arrow_type` understands."""
    match = _DECIMAL.match(lake_type)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        return 1 <= precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision
    return lake_type in LAKE_TYPES


@dataclass(frozen=True, slots=True)
class Column:
    """One column of an offloaded table.

    Attributes:
        name: the name in the source, as the source spells it.
        source_type: the declared source type, for people and reports.
        lake_type: the Spark SQL type in the lake.
        nullable: whether the source allows NULL.
        read_as_text: the source renders the value as text when reading it
            (exact numbers without a precision, JSON, UUIDs...).
        missing_value: for a column added after the offload, the value (as text) every
            source row that existed before the ADD COLUMN reads (PostgreSQL's stored
            default), where the extraction's changes made before the ADD COLUMN lack the
            column; None: NULL, or not an added column. Not part of the comparison with
            the source's description.
        unfilled: added with a default computed for each row (a volatile one, such as
            ``now()``), which a method without row images cannot carry: the lake's rows
            unchanged since show NULL (status and the report say so).
    """

    name: str
    source_type: str
    lake_type: str
    nullable: bool = True
    read_as_text: bool = False
    missing_value: str | None = field(default=None, compare=False)
    unfilled: bool = field(default=False, compare=False)

    @property
    def view_name(self) -> str:
        """The column's name in the user view: lower case (Spark resolves names
        case-insensitively)."""
        return self.name.lower()

    @property
    def lake_name(self) -> str:
        """The column's name in the Delta tables and gluon's internal views: the view name
        when it is plain, else an escaped form (see :func:`gluon.naming.lake_identifier`)."""
        return lake_column(self.name)


def lake_column(name: str) -> str:
    """The lake column name of the source column ``name`` (a key column, for instance)."""
    return lake_identifier(name)


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A source table as introspected, with its lake mapping."""

    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()
    partition_columns: tuple[str, ...] = ()
    partition_kind: str | None = None
    options: dict[str, str] = field(default_factory=dict)

    def column(self, name: str) -> Column:
        """The column named ``name`` (case-insensitive)."""
        for column in self.columns:
            if column.name.lower() == name.lower():
                return column
        raise KeyError(name)

    def has_column(self, name: str) -> bool:
        return any(column.name.lower() == name.lower() for column in self.columns)

    @property
    def arrow_schema(self) -> pa.Schema:
        """The Arrow schema of the rows read from the source."""
        return arrow_schema(self.columns)


def arrow_schema(columns: tuple[Column, ...]) -> pa.Schema:
    """The Arrow schema of lake rows of ``columns`` (all nullable)."""
    import pyarrow as pa

    return pa.schema(
        [pa.field(c.lake_name, arrow_type(c.lake_type), nullable=True) for c in columns]
    )


@dataclass(frozen=True, slots=True)
class PartitionColumn:
    """One lake partition column derived from a source column.

    Attributes:
        source_column: the source column it is derived from.
        granularity: ``Y``/``M``/``D`` for dates, a width for integers, a
            prefix length for strings, or empty for the value itself.
        lake_column: the derived column's name in the base table.
        expression: the Spark SQL expression computing it from a row.
    """

    source_column: str
    granularity: str
    lake_column: str
    expression: str


# -- Arrow values built from bytes --------------------------------------------------------------
# Converting any Python value to Arrow (pa.array, pa.scalar, a literal passed to a compute
# function) makes pyarrow import pandas first (its pandas shim checks the value's type):
# 0.3-0.7 s, half of an IMMEDIATE sync of 20k changes (issue 28). The extraction's hot path
# builds its few constants from bytes instead.


def arrow_int_scalar(value: int, data_type: pa.DataType | None = None) -> pa.Scalar:
    """``value`` as an Arrow integer scalar (int64 unless ``data_type``), without pandas."""
    import pyarrow as pa

    data_type = data_type or pa.int64()
    data = value.to_bytes(data_type.bit_width // 8, "little", signed=True)
    return pa.Array.from_buffers(data_type, 1, [None, pa.py_buffer(data)])[0]


def arrow_bool_scalar(value: bool) -> pa.Scalar:
    """``value`` as an Arrow boolean scalar, without pandas."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.bool_(), 1, [None, pa.py_buffer(bytes([int(value)]))])[0]


def arrow_string_scalar(value: str) -> pa.Scalar:
    """``value`` as an Arrow string scalar, without pandas."""
    import pyarrow as pa

    data = value.encode()
    offsets = (0).to_bytes(4, "little") + len(data).to_bytes(4, "little")
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])[
        0
    ]


def arrow_repeat(scalar: pa.Scalar, count: int) -> pa.Array:
    """An array of ``count`` copies of ``scalar`` (see :func:`arrow_int_scalar`)."""
    import pyarrow as pa

    return pa.repeat(scalar, count)
