"""From the source driver to Arrow in the lake's types, checked as it converts.

Two paths. Drivers with their own Arrow reads (ADBC, python-oracledb) hand over
record batches: :func:`rebatch` sizes them and :func:`conform` casts each column
once, vectorized. Otherwise each DBAPI value goes through one converter per lake
type (:func:`converter_for`, :func:`to_batch`). Either way a value that does not
fit its column's lake type fails the read with one line naming the column,
rather than reaching the lake changed.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

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
            unfit = _unfit_values(values, convert, field.type)
            found = [dict(zip(schema.names, rows[at], strict=True)) for at in unfit]
            raise _misfit(field, spec, exc, found) from exc
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class UnfitValueError(SourceError):
    """A value read from the source does not fit its column's lake type.

    ``rows`` holds the driver's values of each row of the batch whose value in ``column``
    does not fit, by lake column name (a value with no Python form is None), so a caller can
    name the rows: an extraction names each change by its ``gl_seq`` and key.
    """

    def __init__(
        self, message: str, *, column: str, reason: str, rows: list[dict[str, Any]]
    ) -> None:
        super().__init__(message)
        self.column = column
        self.reason = reason
        self.rows = rows


def _unfit_values(values: Sequence[Any], convert: Converter, target: pa.DataType) -> list[int]:
    """The indexes of ``values`` that ``convert`` or Arrow refuse as ``target``.

    Only on the failure path: one conversion per value.
    """
    refused: list[int] = []
    for index, value in enumerate(values):
        try:
            pa.array([None if value is None else convert(value)], type=target)
        except (ValueError, TypeError, ArithmeticError, pa.ArrowException):
            refused.append(index)
    return refused


def _unfit_casts(array: pa.Array, target: pa.DataType) -> list[int]:
    """The indexes of ``array`` that :func:`cast_exactly` refuses as ``target`` (failure path:
    one cast per value)."""
    refused: list[int] = []
    for index in range(len(array)):
        try:
            cast_exactly(array.slice(index, 1), target)
        except (ValueError, TypeError, ArithmeticError, pa.ArrowException):
            refused.append(index)
    return refused


def _misfit(
    field: pa.Field, spec: TableSpec, exc: BaseException, rows: list[dict[str, Any]]
) -> UnfitValueError:
    """The one-line error for a value of ``field`` that does not fit its lake type."""
    return UnfitValueError(
        f"column {field.name} of {spec.schema}.{spec.name} holds a value that does not "
        f"fit its lake type {arrow_type_name(field.type)}: {exc}",
        column=field.name,
        reason=str(exc),
        rows=rows,
    )


def arrow_type_name(arrow: pa.DataType) -> str:
    return str(arrow)


# -- Arrow-native reads: the driver's own batches, conformed to the lake schema ------------


def rebatch(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``batches`` again, as batches of exactly ``rows`` (the last may be shorter).

    A driver's stream sizes its batches by bytes; callers size theirs by rows (one
    Delta commit, one ``--limit`` read), so the boundaries move, in Arrow.
    """
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        held += batch.num_rows
        while held >= rows:
            table = pa.Table.from_batches(pending)
            yield table.slice(0, rows).combine_chunks().to_batches()[0]
            rest = table.slice(rows)
            pending = rest.combine_chunks().to_batches() if rest.num_rows else []
            held = rest.num_rows
    if held:
        yield pa.Table.from_batches(pending).combine_chunks().to_batches()[0]


def conform(batch: pa.RecordBatch, schema: pa.Schema, spec: TableSpec) -> pa.RecordBatch:
    """``batch`` (the driver's types, columns in ``schema`` order) as ``schema``: one cast each.

    The casts are exact or fail: a decimal that would be rounded or does not fit its
    precision, an integer out of range, text that is not a date all raise the same
    one-line :class:`SourceError` naming the column as the per-value converters do.
    """
    if batch.num_columns != len(schema):
        raise SourceError(
            f"reading {spec.schema}.{spec.name} returned {batch.num_columns} columns, "
            f"expected {len(schema)}"
        )
    arrays = []
    for array, field in zip(batch.columns, schema, strict=True):
        try:
            arrays.append(cast_exactly(array, field.type))
        except (ValueError, TypeError, ArithmeticError, pa.ArrowException) as exc:
            unfit = _unfit_casts(array, field.type)
            found = [_row_values(batch, schema, at) for at in unfit]
            raise _misfit(field, spec, exc, found) from exc
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _row_values(batch: pa.RecordBatch, schema: pa.Schema, index: int) -> dict[str, Any]:
    """Row ``index`` of ``batch`` by ``schema``'s names, as Python values (None where the
    driver's value has no Python form, such as a wrapped-around infinity)."""
    values: dict[str, Any] = {}
    for name, array in zip(schema.names, batch.columns, strict=True):
        if isinstance(array, pa.ExtensionArray):
            array = array.storage  # PostgreSQL's numeric: the text of the exact value
        try:
            values[name] = array[index].as_py()
        except (ValueError, TypeError, ArithmeticError, OverflowError, pa.ArrowException):
            values[name] = None
    return values


def cast_exactly(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target``, refusing any cast that would change a value.

    Drivers hand some types over in their storage form (PostgreSQL's numeric as the
    text of the exact value, inside an ``arrow.opaque`` extension type): the storage
    is what is cast. Arrow's safe casts refuse rounding, overflow and truncation.
    """
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if pa.types.is_decimal(target) and pa.types.is_floating(array.type):
        raise TypeError(f"binary floating point {array.type} is not an exact decimal")
    cast = array if array.type == target else pc.cast(array, target, safe=True)
    if pa.types.is_timestamp(target) or pa.types.is_date(target):
        _check_calendar(cast)
    return cast


# The instants a Python datetime holds, which the per-value path takes: in microseconds
# (timestamps, after the cast to ``us``) and in days (dates) since 1970-01-01.
_EPOCH = dt.datetime(1970, 1, 1)
_CALENDAR: dict[str, tuple[int, int]] = {
    "us": (
        (dt.datetime.min - _EPOCH) // dt.timedelta(microseconds=1),
        (dt.datetime.max - _EPOCH) // dt.timedelta(microseconds=1),
    ),
    "day": ((dt.date.min - _EPOCH.date()).days, (dt.date.max - _EPOCH.date()).days),
}


def _check_calendar(array: pa.Array) -> None:
    """Refuse dates and times outside the years 1-9999.

    A driver's Arrow path may hand over what the row-wise path refused: ADBC turns
    PostgreSQL's ``infinity`` into a wrapped-around number of microseconds.
    """
    unit = "day" if pa.types.is_date(array.type) else str(array.type.unit)
    if unit not in _CALENDAR or array.null_count == len(array):
        return
    low, high = _CALENDAR[unit]
    bounds = pc.min_max(array.view(pa.int32() if unit == "day" else pa.int64()))
    smallest, largest = bounds["min"].as_py(), bounds["max"].as_py()
    if smallest < low or largest > high:
        raise ValueError("a date or time outside the years 1-9999 (an infinity?)")
