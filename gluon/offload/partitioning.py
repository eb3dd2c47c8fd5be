"""Lake partitioning of the base table (``--partition-columns``, ``--partition-granularity``).

Each partition column is derived from a source column by a Spark SQL
expression, stored in the repository so later steps (in-place compaction)
compute the same partition for a changed row.
"""

from __future__ import annotations

from collections.abc import Callable

from gluon.errors import UsageError
from gluon.lake import sql
from gluon.schema import Column, PartitionColumn, TableSpec

DATE_GRANULARITIES: dict[str, int] = {"Y": 4, "M": 7, "D": 10}
"""Date granularity -> length of the ``YYYY-MM-DD`` prefix that names the partition."""

DEFAULT_DATE_GRANULARITY = "M"
INTEGER_TYPES = frozenset({"tinyint", "smallint", "int", "bigint"})
DATE_TYPES = frozenset({"date", "timestamp_ntz", "timestamp"})


def _date_expression(column: Column, granularity: str) -> str:
    grain = (granularity or DEFAULT_DATE_GRANULARITY).upper()
    if grain not in DATE_GRANULARITIES:
        raise UsageError(
            f"--partition-granularity for date column {column.name} must be Y, M or D, "
            f"found {granularity!r}"
        )
    length = DATE_GRANULARITIES[grain]
    return sql.date_prefix(column.lake_name, length)


def _integer_expression(column: Column, granularity: str) -> str:
    if not granularity:
        return sql.as_bigint(column.lake_name)
    return sql.integer_bucket(column.lake_name, _positive(column, granularity))


def _decimal_expression(column: Column, granularity: str) -> str:
    if not granularity:
        raise UsageError(
            f"--partition-granularity is needed for decimal column {column.name} (a range width)"
        )
    return sql.decimal_bucket(column.lake_name, _positive(column, granularity))


def _string_expression(column: Column, granularity: str) -> str:
    length = _positive(column, granularity) if granularity else None
    return sql.string_prefix(column.lake_name, length)


def _positive(column: Column, granularity: str) -> int:
    if not granularity.isdigit() or int(granularity) <= 0:
        raise UsageError(
            f"--partition-granularity for column {column.name} must be a positive whole "
            f"number, found {granularity!r}"
        )
    return int(granularity)


def _expression_builder(column: Column) -> Callable[[Column, str], str] | None:
    if column.lake_type in DATE_TYPES:
        return _date_expression
    if column.lake_type in INTEGER_TYPES:
        return _integer_expression
    if column.lake_type.startswith("decimal("):
        return _decimal_expression
    if column.lake_type == "string":
        return _string_expression
    return None


def plan_partitioning(
    spec: TableSpec, columns: list[str], granularities: list[str]
) -> tuple[PartitionColumn, ...]:
    """Validate the partitioning options against ``spec``.

    Args:
        spec: the source table.
        columns: ``--partition-columns`` split on commas.
        granularities: ``--partition-granularity`` split on commas: one value
            for all columns, or one per column.

    Raises:
        UsageError: unknown column, wrong count of granularities, unusable type or value.
    """
    if not columns:
        if granularities:
            raise UsageError("--partition-granularity needs --partition-columns")
        return ()
    if len(granularities) not in (0, 1, len(columns)):
        raise UsageError(
            f"--partition-granularity takes one value or one per partition column "
            f"({len(columns)}), found {len(granularities)}"
        )
    result: list[PartitionColumn] = []
    for index, name in enumerate(columns):
        if not spec.has_column(name):
            known = ", ".join(column.name for column in spec.columns)
            raise UsageError(f"--partition-columns: {spec.name} has no column {name!r} ({known})")
        column = spec.column(name)
        granularity = granularities[index if len(granularities) > 1 else 0] if granularities else ""
        builder = _expression_builder(column)
        if builder is None:
            raise UsageError(
                f"--partition-columns: column {column.name} of type {column.source_type} "
                "cannot partition the lake table (use a date, number or string column)"
            )
        result.append(
            PartitionColumn(
                source_column=column.name,
                granularity=granularity.upper() if column.lake_type in DATE_TYPES else granularity,
                lake_column=f"gl_part_{column.lake_name}",
                expression=builder(column, granularity),
            )
        )
    return tuple(result)
