"""Merge mode IMMEDIATE: staging a batch with deltalake, without starting the engine.

Starting the embedded engine and its Spark Connect client (pyspark, pandas, grpc) costs
more than staging and merging a batch of tens of thousands of changes: an IMMEDIATE sync
through the engine took 2x a hand-written deltalake merge of the same changes (issue 28).
The merge itself goes through deltalake already (``gluon.lake.merge``); the staging
commit does too when every value it holds can be computed in Arrow exactly as the engine
would: the table's columns, gluon's, and the base table's partition columns when each is
one of the two integer shapes of ``gluon.lake.sql`` (the value as BIGINT, or the lower
bound of its range). Any other partition expression (a date or string prefix, a decimal
range) is Spark SQL only the engine evaluates: :func:`arrow_partition_values` says None
and the batch is staged through the engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gluon.faults import fault_point
from gluon.lake import sql
from gluon.lake.storage import delta_version
from gluon.schema import Column, PartitionColumn, arrow_schema

if TYPE_CHECKING:
    import pyarrow as pa

INTEGER_TYPES = frozenset({"tinyint", "smallint", "int", "bigint"})
PartitionValues = dict[str, "pa.Array"]


def arrow_partition_values(
    changes: pa.Table, columns: tuple[Column, ...], partitioning: tuple[PartitionColumn, ...]
) -> PartitionValues | None:
    """Each partition column's values for ``changes``, computed in Arrow as the engine
    computes its expression; None when one is an expression only the engine evaluates."""
    import pyarrow as pa
    import pyarrow.compute as pc

    by_name = {column.name: column for column in columns}
    values: PartitionValues = {}
    for part in partitioning:
        column = by_name.get(part.source_column)
        if column is None or column.lake_type not in INTEGER_TYPES:
            return None
        source = changes.column(column.lake_name)
        if part.expression == sql.as_bigint(column.lake_name):
            values[part.lake_column] = pc.cast(source, pa.int64())
        elif part.granularity.isdigit() and part.expression == sql.integer_bucket(
            column.lake_name, int(part.granularity)
        ):
            # Spark's ``/`` divides as doubles, ``floor`` gives a BIGINT: the same here.
            width = int(part.granularity)
            quotient = pc.floor(pc.divide(pc.cast(source, pa.float64()), float(width)))
            values[part.lake_column] = pc.multiply(pc.cast(quotient, pa.int64()), width)
        else:
            return None
    return values


def write_stage(
    stage_path: str,
    staged_columns: tuple[Column, ...],
    changes: pa.Table,
    partition_values: PartitionValues,
    partition_column: str,
) -> tuple[int, pa.Table]:
    """Replace the staging table's rows with ``changes`` (every column of
    ``staged_columns``) and the partition columns, in one deltalake commit; return the
    staging version it made and the rows as written."""
    import pyarrow as pa
    from deltalake import write_deltalake

    schema = arrow_schema(staged_columns)
    rows = changes.select(schema.names).cast(schema)
    for name, array in partition_values.items():
        rows = rows.append_column(pa.field(name, pa.int64()), array)
    fault_point("lake.before_write")
    # The schema follows the table's (and the first batch adds the partition columns).
    write_deltalake(
        stage_path, rows, mode="overwrite", partition_by=[partition_column], schema_mode="overwrite"
    )
    fault_point("lake.after_write")
    version = delta_version(stage_path)
    if version is None:
        raise AssertionError(f"the staging table at {stage_path} does not hold the batch")
    return version, rows
