"""Every Spark SQL statement gluon sends to the lake engine is built here.

One quoting function (:func:`quote_part`; :func:`quote` applies it to each dotted part),
one literal function (:func:`literal`), and small builders for each statement. Bigger
queries are templates in ``templates/lake/`` rendered by :func:`render`, which receive
only computed values (quoted names, predicates), never Python callbacks. Nothing outside
``gluon/lake/`` writes Spark SQL text (tests/unit/test_lake_sql_layer.py checks it).
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Iterable, Sequence
from typing import Any

from gluon import templates

CONTROL_PARTITION = "gl_control_partition"
"""The delta table's Delta partition column (the change ingestion location)."""


def quote_part(name: str) -> str:
    """One Spark SQL identifier (a column name), back-quoted; dots stay part of it."""
    return "`" + name.replace("`", "``") + "`"


def quote(name: str) -> str:
    """A Spark SQL object name: each dotted part back-quoted (``schema.table``)."""
    return ".".join(quote_part(part) for part in name.split("."))


def string_literal(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def literal(value: Any) -> str:
    """A Spark SQL literal for a Python value (a partition value, a bound)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, str):
        return string_literal(value)
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP {string_literal(value.isoformat(sep=' '))}"
    if isinstance(value, dt.date):
        return f"DATE {string_literal(value.isoformat())}"
    raise TypeError(f"no Spark SQL literal for {value!r}")


def render(name: str, **context: Any) -> str:
    """The lake template ``templates/lake/<name>.sql.j2``, rendered with ``context``."""
    return templates.render("lake", name, quote=quote, **context).strip()


# --- predicates -------------------------------------------------------------------------


def partition_range(alias: str, low: int, high: int | None) -> str:
    """Rows of ``alias`` (``"gl_delta."`` or ``""``) in control partitions [low, high]."""
    column = f"{alias}{CONTROL_PARTITION}"
    if high is None:
        return f"{column} >= {int(low)}"
    return f"{column} BETWEEN {int(low)} AND {int(high)}"


def up_to_partition(high: int) -> str:
    """Rows in control partitions up to ``high`` (those a compaction applied)."""
    return f"{CONTROL_PARTITION} <= {int(high)}"


def equals(column: str, value: Any) -> str:
    """``column = value`` (``IS NULL`` for None) for a lake column name."""
    quoted = quote_part(column)
    return f"{quoted} IS NULL" if value is None else f"{quoted} = {literal(value)}"


def all_of(terms: Iterable[str]) -> str:
    """``a AND b ...`` (``true`` for no terms)."""
    return " AND ".join(terms) or "true"


def any_of(predicates: Iterable[str]) -> str:
    """``(a) OR (b) ...`` (``false`` for none)."""
    return " OR ".join(f"({predicate})" for predicate in predicates) or "false"


def exactly_where(predicate: str) -> str:
    """``predicate`` for a replaceWhere: the rows it is TRUE for, not those it is NULL for.

    Sail 0.7.2 keeps the rows of a rewritten file where ``NOT predicate`` is TRUE, so a row
    whose predicate is NULL (a NULL key outside an increment's range) was dropped. The
    ``IS TRUE`` term makes NULL count as FALSE; the bare conjunct keeps file pruning by
    statistics, which ``IS TRUE`` alone defeats (every file would be rewritten).
    """
    return f"({predicate}) AND (({predicate}) IS TRUE)"


def same_partition(columns: Sequence[str], left: str, right: str) -> str:
    """``left.c <=> right.c AND ...`` over the partition ``columns`` (NULL-safe)."""
    return " AND ".join(f"{left}.{quote_part(c)} <=> {right}.{quote_part(c)}" for c in columns)


# --- relations and queries ----------------------------------------------------------------


def version_of_path(path: str, version: int) -> str:
    """A query of one version of the Delta table at ``path`` (for ``gluon query``)."""
    return f"SELECT * FROM delta.{quote_part(path)} VERSION AS OF {int(version)}"


def select_all(relation: str, where: str | None = None, *, alias: str = "") -> str:
    """``SELECT * FROM relation [alias] [WHERE ...]`` (``relation`` already rendered)."""
    text = f"SELECT * FROM {relation}" + (f" {alias}" if alias else "")
    return text + (f" WHERE {where}" if where else "")


def subquery(select: str, alias: str) -> str:
    """``(select) alias``: a query used as a relation."""
    return f"({select}) {alias}"


def count_where(relation: str, where: str) -> str:
    return f"SELECT COUNT(*) FROM {relation} WHERE {where}"


def select_expressions(relation: str, expressions: Sequence[str]) -> str:
    """``SELECT e1, e2 FROM relation`` (expressions already rendered)."""
    return f"SELECT {', '.join(expressions)} FROM {relation}"


def with_columns(relation: str, derived: Sequence[tuple[str, str]]) -> str:
    """``SELECT *, expression AS name ... FROM relation``: ``relation`` plus derived columns."""
    listed = ["*", *(f"{expression} AS {quote_part(name)}" for expression, name in derived)]
    return select_expressions(relation, listed)


def cast_as(column: str, lake_type: str) -> str:
    """``CAST(column AS type) AS column``: a column read as a wider type."""
    return f"CAST({quote_part(column)} AS {lake_type}) AS {quote_part(column)}"


def exists_in(listed: str, alias: str, columns: Sequence[str]) -> str:
    """True for rows of ``alias`` whose partition ``columns`` appear in the table ``listed``."""
    return (
        f"EXISTS (SELECT 1 FROM {listed} gl_listed "
        f"WHERE {same_partition(columns, 'gl_listed', alias)})"
    )


def select_changes(delta_table: str, *, low: int, high: int, min_partition: int) -> str:
    """``(gl_seq, gl_extraction_id)`` of the changes with ``gl_seq`` in [low, high]."""
    return (
        f"SELECT gl_seq, gl_extraction_id FROM {quote(delta_table)} "
        f"WHERE {partition_range('', min_partition, None)} "
        f"AND gl_seq BETWEEN {int(low)} AND {int(high)}"
    )


def changes_since(delta_table: str, min_partition: int, where: str) -> str:
    """Count the changes in control partitions from ``min_partition`` matching ``where``."""
    since = partition_range("", min_partition, None)
    return count_where(quote(delta_table), f"{since} AND {where}")


# --- statements ----------------------------------------------------------------------------


def create_schema(schema: str) -> str:
    return f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}"


def drop_table(name: str) -> str:
    return f"DROP TABLE IF EXISTS {quote(name)}"


def create_table_at(name: str, location: str) -> str:
    """Register the Delta table at ``location`` as ``name`` unless ``name`` exists."""
    return (
        f"CREATE TABLE IF NOT EXISTS {quote(name)} USING delta LOCATION {string_literal(location)}"
    )


def describe_extended(name: str) -> str:
    return f"DESCRIBE TABLE EXTENDED {quote(name)}"


def create_view(name: str, select: str, column_names: Sequence[str] | None = None) -> str:
    """``CREATE OR REPLACE VIEW name [(columns)] AS select``."""
    listed = f" ({', '.join(quote_part(c) for c in column_names)})" if column_names else ""
    return f"CREATE OR REPLACE VIEW {quote(name)}{listed} AS {select}"


def select_columns(columns: Sequence[str], source: str) -> str:
    """``SELECT <columns> FROM source`` for lake column names and a catalog name."""
    return select_expressions(quote(source), [quote_part(c) for c in columns])


def replace_where(target: str, predicate: str, source: str) -> str:
    """Replace the rows of table ``target`` matching ``predicate`` by those of the relation
    ``source`` matching it (:func:`exactly_where`: rows whose predicate is NULL stay)."""
    return (
        f"INSERT INTO {quote(target)} REPLACE WHERE {exactly_where(predicate)} "
        f"{select_all(source, predicate)}"
    )


def delete_where(name: str, where: str) -> str:
    return f"DELETE FROM {quote(name)} WHERE {where}"
