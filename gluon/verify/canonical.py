"""Values that compare equal when they are equal, whichever engine produced them.

Both sides are read into the lake's Arrow types first (the source through the same
conversion the offload uses), so what is left is what Arrow and Python do not settle:
NaN is not equal to itself, -0.0 is equal to 0.0, a timestamp's zone, a decimal's trailing
zeros, JSON key order.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from typing import Any

Canonical = tuple[object, ...]


def canonical_value(value: Any) -> object:
    """One value in a form that is equal exactly when the values are equal."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"  # NaN != NaN, but the lake holds what the source held
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return "-0.0"  # -0.0 == 0.0, but the sign is data (PostgreSQL prints -0)
        return value
    if isinstance(value, decimal.Decimal):
        return "NaN" if value.is_nan() else value.normalize()
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return value


def canonical_text(value: Any) -> object:
    """A JSON document's text in canonical form: key order and spacing do not count, numbers
    count by value (jsonb and the capture triggers rewrite ``2e3`` as ``2000``), and the
    document ``null`` is NULL (the lake does not keep them apart)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = repr(value)  # SQLite's NUMERIC affinity stores a bare JSON number as one
    if not isinstance(value, str):
        return canonical_value(value)
    try:
        parsed = json.loads(value, parse_float=decimal.Decimal, parse_int=decimal.Decimal)
    except ValueError:
        return value
    return None if parsed is None else json.dumps(_by_value(parsed), sort_keys=True)


def _by_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _by_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_by_value(item) for item in value]
    if isinstance(value, decimal.Decimal):
        return {"number": str(value.normalize())}  # apart from a string of the same digits
    return value


def canonical_row(values: list[Any], json_columns: frozenset[int]) -> Canonical:
    return tuple(
        canonical_text(value) if index in json_columns else canonical_value(value)
        for index, value in enumerate(values)
    )
