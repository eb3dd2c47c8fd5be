"""Values that compare equal when they are equal, whichever engine produced them.

Both sides are read into the lake's Arrow types first (the source through the same
conversion the offload uses), so what is left is what Arrow and Python do not settle:
NaN is not equal to itself, a timestamp's zone, a decimal's trailing zeros, JSON key order.
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
    """A JSON document's text in canonical form (key order and spacing do not count)."""
    if not isinstance(value, str):
        return canonical_value(value)
    try:
        return json.dumps(json.loads(value), sort_keys=True)
    except ValueError:
        return value


def canonical_row(values: list[Any], json_columns: frozenset[int]) -> Canonical:
    return tuple(
        canonical_text(value) if index in json_columns else canonical_value(value)
        for index, value in enumerate(values)
    )
