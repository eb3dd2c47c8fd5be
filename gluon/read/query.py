"""``gluon query``: run SQL against the lake with the gluon views it names registered."""

from __future__ import annotations

import base64
import csv
import datetime as dt
import decimal
import difflib
import io
import json
import logging
import math
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from gluon.config import Settings
from gluon.errors import GluonError, LakeError
from gluon.lake import user_sql
from gluon.lake.session import LakeSession, first_line
from gluon.read.catalog import lake_session, unavailable_error

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
        return run_statement(session, statement)


def run_statement(session: LakeSession, statement: str) -> pa.Table:
    """Run ``statement`` in a session whose tables are registered (``gluon query``, ``gluon
    shell``); the result as an Arrow table.

    Raises:
        LakeError: the statement failed: the engine's first line, or the unavailable table
            it names and why.
    """
    try:
        return session.sql(user_sql.engine_form(statement)).toArrow()
    except Exception as exc:
        named = unavailable_error(session, statement)
        if named is not None:
            raise named from exc
        if isinstance(exc, GluonError) and not isinstance(exc, LakeError):
            raise
        # The engine's own words, once: not the session's "rejected a statement" wrapper.
        engine_error = exc.__cause__ if isinstance(exc, LakeError) and exc.__cause__ else exc
        column = user_sql.missing_column(str(engine_error))
        if column is not None:
            message = _no_such_column(session, statement, column)
            raise LakeError(f"the query failed: {message}") from exc
        raise LakeError(f"the query failed: {first_line(engine_error)}") from exc


SHOWN_COLUMNS = 12
"""How many of a table's columns an unknown-column error lists."""


def _no_such_column(session: LakeSession, statement: str, column: str) -> str:
    """``column`` is in none of the tables ``statement`` reads: which those are, the columns
    they have (some), and the nearest names."""
    have: dict[str, list[str]] = {}
    for name in user_sql.relations(statement):
        try:
            have[name] = session.columns(name)
        except LakeError:  # a subquery's alias, a function: not a table to list
            continue
    if not have:
        return f"column {column} does not exist in the tables the statement reads"
    every = [name for names in have.values() for name in names]
    nearest = difflib.get_close_matches(column.rsplit(".", 1)[-1], every, n=3)
    hint = f"did you mean {' or '.join(dict.fromkeys(nearest))}? " if nearest else ""
    listed = "; ".join(
        f"{table}: {_some(names)}" if len(have) > 1 else _some(names)
        for table, names in have.items()
    )
    return f"column {column} is not in {' or '.join(have)} ({hint}columns: {listed})"


def _some(names: list[str]) -> str:
    shown = ", ".join(names[:SHOWN_COLUMNS])
    more = len(names) - SHOWN_COLUMNS
    return f"{shown}, ... ({more} more)" if more > 0 else shown


def split_statements(text: str) -> tuple[list[str], str]:
    """The complete statements of ``text`` (each ended by a ``;`` outside quotes and
    comments, without it) and the unfinished rest."""
    statements: list[str] = []
    start = 0
    quote: str | None = None
    index = 0
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"`":
            quote = char
        elif text.startswith("--", index):
            newline = text.find("\n", index)
            index = len(text) if newline < 0 else newline
            continue
        elif char == ";":
            statement = text[start:index].strip()
            if statement:
                statements.append(statement)
            start = index + 1
        index += 1
    return statements, text[start:]


def display_value(value: Any) -> str:
    """A value as a result table shows it: NULL, not "None" or pandas' NaN."""
    if value is None:
        return "NULL"
    if isinstance(value, float) and not math.isfinite(value):
        return non_finite_text(value)
    if isinstance(value, str):
        return value
    rendered = json_value(value)
    return rendered if isinstance(rendered, str) else json.dumps(rendered, ensure_ascii=False)


def non_finite_text(value: float) -> str:
    """``"NaN"``, ``"Infinity"`` or ``"-Infinity"``: JSON has no such numbers, so they are
    written as these strings (as the proto3 JSON mapping does) and every output stays valid
    JSON for a strict parser (docs/operations.md)."""
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def json_value(value: Any) -> Any:
    """A JSON value that keeps ``value`` exact: decimals as strings, times in ISO 8601, NaN and
    infinities as the strings of ``NON_FINITE``."""
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, float) and not math.isfinite(value):
        return non_finite_text(value)
    if isinstance(value, dict):
        return {key: json_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_value(item) for item in value]
    return value


def to_records(table: pa.Table) -> list[dict[str, Any]]:
    """Rows as dictionaries keyed by column name, values made JSON-safe and exact."""
    return [{key: json_value(value) for key, value in row.items()} for row in table.to_pylist()]


def to_json(table: pa.Table) -> str:
    return json.dumps(to_records(table), ensure_ascii=False, allow_nan=False)


def to_text(table: pa.Table) -> str:
    """Aligned columns for people (NULL as ``NULL``, not pandas' NaN), or ``(no rows)``."""
    if not table.num_rows:
        return "(no rows)"
    import pandas as pd

    shown = pd.DataFrame(display_rows(table), columns=table.column_names)
    return str(shown.to_string(index=False))


def display_rows(table: pa.Table) -> list[tuple[str, ...]]:
    """Rows of ``display_value`` texts, by position (a result may repeat a column name)."""
    columns = [[display_value(value) for value in column.to_pylist()] for column in table.columns]
    return list(zip(*columns, strict=True))


def to_csv(table: pa.Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.column_names)
    for row in to_records(table):
        writer.writerow([csv_cell(value) for value in row.values()])
    return buffer.getvalue()


def csv_cell(value: Any) -> Any:
    """A CSV cell: empty for NULL, ``true``/``false`` for a boolean, as the JSON output and
    Spark's own CSV writer spell them (Python's ``True`` is nobody's CSV convention)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value
