"""From DBAPI values to Arrow: one converter per lake type, checked as it converts.

A value that does not fit its column's lake type fails the read with one line
naming the column, rather than reaching the lake changed.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from gluon.errors import SourceError
from gluon.schema import Column, TableSpec

Converter = Callable[[Any], Any]


def identity(value: Any) -> Any:
    return value


def _utc(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    return value


def _naive_timestamp(value: Any) -> Any:
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    raise ValueError(f"not a timestamp: {value!r}")


def _date(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.time() != dt.time(0):
            raise ValueError(f"a date column holds a time of day: {value!r}")
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, str):
        return dt.date.fromisoformat(value)
    raise ValueError(f"not a date: {value!r}")


# Wide enough for decimal(38, s) values, which the default 28-digit context cannot quantize.
_WIDE = decimal.Context(prec=80, rounding=decimal.ROUND_HALF_EVEN)


def _decimal_converter(scale: int) -> Converter:
    quantum = decimal.Decimal(1).scaleb(-scale)

    def convert(value: Any) -> Any:
        if isinstance(value, float):
            # Only SQLite hands out floats for NUMERIC(p,s): it stores them as REAL and ignores
            # the declared scale, so the declared scale is the user's intent (30.250000000000004
            # from 27.5 * 1.1 is 30.25). Other sources return exact Decimals.
            exact = decimal.Decimal(repr(value))
            return _WIDE.quantize(exact, quantum)
        if isinstance(value, int | str):
            return decimal.Decimal(value)
        return value

    return convert


def _text(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        raise ValueError("binary data in a text column (declare the column as BLOB)")
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    return str(value)


def _boolean(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise ValueError(f"not a boolean: {value!r}")


def _bytes(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise ValueError(f"not binary data: {value!r}")


def _integer(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
            return int(value)
        raise ValueError(f"not an integer: {value!r}")
    return value


_CONVERTERS: dict[str, Converter] = {
    "timestamp_ntz": _naive_timestamp,
    "timestamp": _utc,
    "date": _date,
    "string": _text,
    "boolean": _boolean,
    "binary": _bytes,
    "tinyint": _integer,
    "smallint": _integer,
    "int": _integer,
    "bigint": _integer,
}


def converter_for(column: Column) -> Converter:
    """The function that turns a DBAPI value of ``column`` into what Arrow expects."""
    if column.lake_type.startswith("decimal("):
        scale = int(column.lake_type.rstrip(")").split(",")[1])
        return _decimal_converter(scale)
    return _CONVERTERS.get(column.lake_type, identity)


def to_batch(
    rows: Sequence[Sequence[Any]],
    schema: pa.Schema,
    converters: Sequence[Converter],
    spec: TableSpec,
) -> pa.RecordBatch:
    arrays = []
    for index, (field, convert) in enumerate(zip(schema, converters, strict=True)):
        values = [row[index] for row in rows]
        try:
            converted = [None if value is None else convert(value) for value in values]
            arrays.append(pa.array(converted, type=field.type))
        except (ValueError, TypeError, ArithmeticError, pa.ArrowException) as exc:
            raise SourceError(
                f"column {field.name} of {spec.schema}.{spec.name} holds a value that does not "
                f"fit its lake type {arrow_type_name(field.type)}: {exc}"
            ) from exc
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def arrow_type_name(arrow: pa.DataType) -> str:
    return str(arrow)
