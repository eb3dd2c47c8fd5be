"""``gluon query``: run SQL against the lake with every gluon view registered."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import io
import json
import math
from typing import Any

import pyarrow as pa

from gluon.catalog import lake_session
from gluon.config import Settings


def run_query(settings: Settings, statement: str) -> pa.Table:
    """Run ``statement``; return the result as an Arrow table."""
    with lake_session(settings) as session:
        return session.sql(statement).toArrow()


def json_value(value: Any) -> Any:
    """A JSON value that keeps ``value`` exact: decimals as strings, times in ISO 8601."""
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: json_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_value(item) for item in value]
    return value


def to_records(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as dictionaries keyed by column name, values made JSON-safe and exact."""
    return [{key: json_value(value) for key, value in row.items()} for row in table.to_pylist()]


def to_json(table: pa.Table) -> str:
    return json.dumps(to_records(table), ensure_ascii=False)


def to_csv(table: pa.Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.column_names)
    for row in to_records(table):
        writer.writerow(["" if value is None else value for value in row.values()])
    return buffer.getvalue()
