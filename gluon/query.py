"""``gluon query``: run SQL against the lake with the gluon views it names registered."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import io
import json
import logging
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from gluon.catalog import lake_session, unavailable_error
from gluon.config import Settings
from gluon.errors import GluonError, LakeError
from gluon.lake.session import first_line

log = logging.getLogger(__name__)


def run_query(
    settings: Settings, statement: str, warn: Callable[[str], None] = log.warning
) -> pa.Table:
    """Run ``statement``; return the result as an Arrow table. Only the tables the statement
    names are registered; each of them that could not be (and so cannot be queried) is
    reported through ``warn``.

    Raises:
        LakeError: the statement failed; when it names a table that could not be
            registered, the error names that table and why.
    """
    with lake_session(settings, named_in=statement) as session:
        for view, reason in session.unavailable.items():
            warn(f"{view} is unavailable and was skipped: {reason}")
        try:
            return session.sql(statement).toArrow()
        except Exception as exc:
            named = unavailable_error(session, statement)
            if named is not None:
                raise named from exc
            if isinstance(exc, GluonError):
                raise
            raise LakeError(f"the query failed: {first_line(exc)}") from exc


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
