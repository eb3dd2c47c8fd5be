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
from typing import TYPE_CHECKING, Any

from gluon import templates
from gluon.lake.session import exactly_where

if TYPE_CHECKING:
    from gluon.predicates import Predicate
    from gluon.schema import Column

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


def partition_values(columns: Sequence[str], values: Sequence[Any]) -> str:
    """``c1 = v1 AND c2 IS NULL ...``: the rows of one lake partition (NULL-aware)."""
    return " AND ".join(equals(c, v) for c, v in zip(columns, values, strict=True))


def any_of(predicates: Iterable[str]) -> str:
    """``(a) OR (b) ...`` (``false`` for none)."""
    return " OR ".join(f"({predicate})" for predicate in predicates) or "false"


def same_partition(columns: Sequence[str], left: str, right: str) -> str:
    """``left.c <=> right.c AND ...`` over the partition ``columns`` (NULL-safe)."""
    return " AND ".join(f"{left}.{quote_part(c)} <=> {right}.{quote_part(c)}" for c in columns)


def predicate(parsed: Predicate, columns: Sequence[Column], *, over_user_view: bool = False) -> str:
    """A parsed ``--offload-predicate`` as Spark SQL over the lake columns, with literals
    typed like the columns.

    ``over_user_view``: name the columns as the user view shows them (not as stored).
    """
    from gluon.predicates import Compare, IsNull, Node, Not

    known = parsed.check_columns(columns)

    def name(column: Column) -> str:
        return quote_part(column.view_name if over_user_view else column.lake_name)

    def typed(value: Any, column: Column) -> str:
        if isinstance(value, dt.datetime):
            cast = "TIMESTAMP_NTZ" if column.lake_type == "timestamp_ntz" else "TIMESTAMP"
            return f"CAST({string_literal(value.isoformat(sep=' '))} AS {cast})"
        return literal(value)

    def render_node(node: Node) -> str:
        if isinstance(node, Compare):
            column = known[node.column.lower()]
            return f"{name(column)} {node.op} {typed(node.value, column)}"
        if isinstance(node, IsNull):
            column = known[node.column.lower()]
            return f"{name(column)} {'IS NOT NULL' if node.negated else 'IS NULL'}"
        if isinstance(node, Not):
            return f"NOT ({render_node(node.item)})"
        return "(" + f" {node.op} ".join(render_node(item) for item in node.items) + ")"

    return render_node(parsed.root)


# --- partition columns (their expressions are stored in the repository) --------------------


# Partition expressions avoid substring, left, lpad and date_trunc: Sail's cluster mode
# (0.7) cannot send them to its workers ("ExtendedScalarUdf: no UDF found for substr"), so a
# write through a cluster failed. date_format and regexp_extract travel, and give the same
# values. Tables offloaded earlier keep the expression recorded for them.
DATE_PATTERNS = {4: "yyyy", 7: "yyyy-MM", 10: "yyyy-MM-dd"}
"""A date prefix's length (Y, M, D granularity) to its ``date_format`` pattern."""


def date_prefix(column: str, length: int) -> str:
    """The first ``length`` characters of a date's ``YYYY-MM-DD`` (Y, M or D granularity)."""
    return f"date_format(CAST({quote_part(column)} AS DATE), '{DATE_PATTERNS[length]}')"


def as_bigint(column: str) -> str:
    return f"CAST({quote_part(column)} AS BIGINT)"


def integer_bucket(column: str, width: int) -> str:
    """The lower bound of ``column``'s range of ``width`` values."""
    return f"CAST(floor({quote_part(column)} / {int(width)}) * {int(width)} AS BIGINT)"


def decimal_bucket(column: str, width: int) -> str:
    return f"CAST(floor({quote_part(column)} / {int(width)}) * {int(width)} AS DECIMAL(38,0))"


def string_prefix(column: str, length: int | None) -> str:
    """``column`` itself, or its first ``length`` characters."""
    if length is None:
        return quote_part(column)
    return f"regexp_extract({quote_part(column)}, '(?s)^.{{0,{int(length)}}}', 0)"


# --- merges of a base relation with changes (templates/lake/) -----------------------------


def merged_rows(
    kind: str,
    *,
    columns: Sequence[str],
    keys: Sequence[str],
    base: str,
    delta: str,
    low: int,
    high: int | None,
    truncated: bool = False,
) -> str:
    """The SELECT that merges a base relation with changes (a delta view, or a compaction).

    Args:
        kind: ``merge`` or ``union_all`` (the method's view kind).
        columns: the table's lake column names.
        keys: the key columns' lake names.
        base: the base relation, already rendered (a quoted name, maybe a subquery).
        delta: the delta table relation, already rendered.
        low: the lowest control partition applied.
        high: the highest one applied (None: every newer partition).
        truncated: the changes in range may hold a TRUNCATE (``gl_op`` 'T'): render the
            SELECT that applies it (it reads the changes for one; a plain one does not).
    """
    return render(
        f"{kind}_view",
        truncated=truncated,
        truncate_in_range=partition_range("gl_truncate.", low, high),
        columns=[quote_part(column) for column in columns],
        keys=[quote_part(key) for key in keys],
        base=base,
        delta=delta,
        changes_in_range=partition_range("gl_changes.", low, high),
        delta_in_range=partition_range("gl_delta.", low, high),
        later_in_range=partition_range("gl_later.", low, high),
    )


def partition_split(*, columns: Sequence[str], base: str, touched: str, merged: str) -> str:
    """The base rows outside ``touched`` (a predicate on partition columns) as they are,
    ``UNION ALL`` ``merged`` (the merge of the touched rows with the changes)."""
    return render(
        "partition_split_view",
        columns=[quote_part(column) for column in columns],
        base=base,
        touched=touched,
        merged=merged,
    )


def partitions_to_write(
    template: str,
    *,
    partition_columns: Sequence[str],
    partition_expressions: Sequence[str],
    keys: Sequence[str],
    base: str,
    delta: str,
    low: int,
    high: int,
) -> str:
    """The lake partitions a compaction writes (``affected_partitions``: those holding or
    receiving a changed key; ``all_partitions``: every one of the compacted table)."""
    return render(
        template,
        part_columns=[quote_part(column) for column in partition_columns],
        part_expressions=list(partition_expressions),
        keys=[quote_part(key) for key in keys],
        base=base,
        delta=delta,
        changes_in_range=partition_range("gl_changes.", low, high),
        delta_in_range=partition_range("gl_delta.", low, high),
    )


def latest_changes(*, keys: Sequence[str], delta: str, low: int, high: int) -> str:
    """Each changed key's latest change (deletes too) in control partitions [low, high]:
    the rows :func:`merged_rows` applies, every column of the delta table."""
    return render(
        "compact_latest_changes",
        keys=[quote_part(key) for key in keys],
        delta=delta,
        delta_in_range=partition_range("gl_delta.", low, high),
        later_in_range=partition_range("gl_later.", low, high),
    )


def merged_with_latest(
    *, columns: Sequence[str], keys: Sequence[str], base: str, latest: str
) -> str:
    """:func:`merged_rows` (merge kind) from a relation of :func:`latest_changes` rows."""
    return render(
        "compact_merge_latest",
        columns=[quote_part(column) for column in columns],
        keys=[quote_part(key) for key in keys],
        base=base,
        latest=latest,
    )


# --- relations and queries ----------------------------------------------------------------


def version_of_path(path: str, version: int) -> str:
    """A query of one version of the Delta table at ``path`` (for ``gluon query``)."""
    return f"SELECT * FROM delta.{quote_part(path)} VERSION AS OF {int(version)}"


def version_of_table(name: str, version: int) -> str:
    """A query of one version of the catalog's Delta table ``name`` (a view over it holds;
    one over ``delta.`path` VERSION AS OF`` does not parse back on Sail 0.7)."""
    return f"SELECT * FROM {quote(name)} VERSION AS OF {int(version)}"


def select_all(relation: str, where: str | None = None, *, alias: str = "") -> str:
    """``SELECT * FROM relation [alias] [WHERE ...]`` (``relation`` already rendered)."""
    text = f"SELECT * FROM {relation}" + (f" {alias}" if alias else "")
    return text + (f" WHERE {where}" if where else "")


def subquery(select: str, alias: str = "") -> str:
    """``(select) [alias]``: a query used as a relation."""
    return f"({select}) {alias}" if alias else f"({select})"


def count_where(relation: str, where: str) -> str:
    return f"SELECT COUNT(*) FROM {relation} WHERE {where}"


def select_expressions(relation: str, expressions: Sequence[str]) -> str:
    """``SELECT e1, e2 FROM relation`` (expressions already rendered)."""
    return f"SELECT {', '.join(expressions)} FROM {relation}"


def with_columns(relation: str, derived: Sequence[tuple[str, str]]) -> str:
    """``SELECT *, expression AS name ... FROM relation``: ``relation`` plus derived columns."""
    listed = ["*", *(f"{expression} AS {quote_part(name)}" for expression, name in derived)]
    return select_expressions(relation, listed)


def typed_literal(value: Any, lake_type: str) -> str:
    """``value`` (a Python value of an Arrow column of ``lake_type``) as a Spark SQL
    expression of ``lake_type``: a string cast where a literal would lose the type."""
    if isinstance(value, bytes):
        return f"X'{value.hex()}'"
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, dt.date):
        text = value.isoformat()
    elif isinstance(value, float):
        text = repr(value)
    else:
        return f"CAST({literal(value)} AS {lake_type})"
    return f"CAST({string_literal(text)} AS {lake_type})"


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


def inserted_since(min_partition: int) -> str:
    """The delta table's inserts in control partitions from ``min_partition`` (a filter)."""
    return f"{partition_range('', min_partition, None)} AND gl_op = 'I'"


def truncates_since(min_partition: int) -> str:
    """The delta table's TRUNCATEs (``gl_op`` 'T') in control partitions from
    ``min_partition`` (a filter)."""
    return f"{partition_range('', min_partition, None)} AND gl_op = 'T'"


def changes_since(delta_table: str, min_partition: int, where: str) -> str:
    """Count the changes in control partitions from ``min_partition`` matching ``where``."""
    since = partition_range("", min_partition, None)
    return count_where(quote(delta_table), f"{since} AND {where}")


# --- statements ----------------------------------------------------------------------------


def set_option(key: str, value: int | str) -> str:
    """``SET key=value``: one session option (the embedded engine takes its own there)."""
    return f"SET {key}={value}"


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


def view_statement(quoted_name: str, select: str) -> str:
    """``CREATE OR REPLACE VIEW name AS select;`` for a script, the name already quoted for
    the engine that runs it (``gluon views``, any dialect)."""
    return f"CREATE OR REPLACE VIEW {quoted_name} AS\n{select};"


def select_columns(columns: Sequence[str], source: str, *, where: str | None = None) -> str:
    """``SELECT <columns> FROM source [WHERE ...]`` for column names and a catalog name."""
    text = select_expressions(quote(source), [quote_part(c) for c in columns])
    return f"{text} WHERE {where}" if where else text


def replace_where(target: str, predicate: str, source: str, columns: Sequence[str]) -> str:
    """Replace the rows of table ``target`` matching ``predicate`` by those of the relation
    ``source`` matching it (:func:`exactly_where`: rows whose predicate is NULL stay).

    ``columns`` are the target's, in its order: INSERT matches columns by position, and a
    column carried to a partitioned base follows its partition columns there while merged
    rows have it before them.
    """
    selected = select_expressions(source, [quote_part(column) for column in columns])
    return (
        f"INSERT INTO {quote(target)} REPLACE WHERE {exactly_where(predicate)} "
        f"{selected} WHERE {predicate}"
    )


def delete_where(name: str, where: str) -> str:
    return f"DELETE FROM {quote(name)} WHERE {where}"
