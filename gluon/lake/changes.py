"""The delta table (``SCHEMA_LOAD.TABLE_CHANGES``) and the delta views over it.

The delta table holds the table's columns plus ``gl_seq`` (change order),
``gl_op`` (I/U/D), ``gl_extraction_id`` and ``gl_control_partition`` (its
Delta partition column, the change ingestion location).
"""

from __future__ import annotations

import logging
from functools import reduce
from typing import Any

import pyarrow as pa

from gluon.lake import sql
from gluon.lake.session import LakeSession
from gluon.lake.storage import delta_version
from gluon.lake.types import struct_type
from gluon.schema import Column, arrow_schema, lake_column

log = logging.getLogger(__name__)

CHANGE_COLUMNS: tuple[Column, ...] = (
    Column("gl_seq", "gluon", "bigint"),
    Column("gl_op", "gluon", "string"),
    Column("gl_extraction_id", "gluon", "bigint"),
    Column("gl_control_partition", "gluon", "int"),
)
PARTITION_COLUMN = sql.CONTROL_PARTITION


def delta_columns(columns: tuple[Column, ...]) -> tuple[Column, ...]:
    """The delta table's columns: the table's, then gluon's."""
    return columns + CHANGE_COLUMNS


def create_delta_table(session: LakeSession, location: str, columns: tuple[Column, ...]) -> None:
    """Create the empty delta table at ``location`` (idempotent: an existing table is kept)."""
    if delta_version(location) is not None:
        return
    all_columns = delta_columns(columns)
    empty = pa.Table.from_pylist([], schema=arrow_schema(all_columns))
    frame = session.spark.createDataFrame(empty, schema=struct_type(all_columns))
    session.write(frame, location, mode="overwrite", partition_by=[PARTITION_COLUMN])


def append_changes(
    session: LakeSession,
    location: str,
    columns: tuple[Column, ...],
    changes: pa.Table,
    *,
    extraction_id: int,
    partition: int,
) -> None:
    """Append ``changes`` (table columns + gl_seq + gl_op) to the delta table in one commit."""
    count = changes.num_rows
    changes = changes.append_column(
        "gl_extraction_id", pa.array([extraction_id] * count, pa.int64())
    ).append_column(PARTITION_COLUMN, pa.array([partition] * count, pa.int32()))
    frame = session.spark.createDataFrame(changes, schema=struct_type(delta_columns(columns)))
    session.write(frame, location, mode="append", partition_by=[PARTITION_COLUMN])


def present_changes(
    session: LakeSession, delta_table: str, *, low: int, high: int, min_partition: int
) -> set[tuple[int, int]]:
    """``(gl_seq, gl_extraction_id)`` of the changes with ``gl_seq`` in [low, high] in the
    delta table's live partitions."""
    statement = sql.select_changes(delta_table, low=low, high=high, min_partition=min_partition)
    rows = session.sql(statement).collect()
    return {(int(row[0]), int(row[1])) for row in rows}


def keys_in_lake(
    session: LakeSession,
    columns: tuple[Column, ...],
    base_path: str,
    delta_path: str,
    min_partition: int,
    keys: list[str],
    inserts: pa.Table,
) -> set[tuple[Any, ...]]:
    """The ``keys`` values of ``inserts`` the user view already shows (NULL-safe, like the
    views), as tuples in the order of ``keys`` (lake names of some of the table's ``columns``).
    """
    if inserts.num_rows == 0:
        return set()
    from pyspark.sql import functions as F

    by_name = {column.lake_name: column for column in columns}
    key_columns = tuple(by_name[name] for name in keys)  # the order of ``keys``, as selected
    spark = session.spark
    wanted = spark.createDataFrame(inserts.select(keys), schema=struct_type(key_columns))
    quoted = [sql.quote(name) for name in keys]
    base = spark.read.format("delta").load(base_path).select(*quoted)
    delta = (
        spark.read.format("delta")
        .load(delta_path)
        .where(sql.inserted_since(min_partition))
        .select(*quoted)
    )
    lake = base.unionByName(delta).alias("gl_lake")
    condition = reduce(
        lambda left, right: left & right,
        [
            F.col(f"gl_new.{sql.quote(name)}").eqNullSafe(F.col(f"gl_lake.{sql.quote(name)}"))
            for name in keys
        ],
    )
    found = wanted.alias("gl_new").join(lake, condition, "left_semi").toArrow()
    return {tuple(row[name] for name in keys) for row in found.to_pylist()}


def view_sql(
    kind: str,
    *,
    columns: tuple[Column, ...],
    keys: tuple[str, ...],
    base: str,
    delta: str,
    min_partition: int,
    max_partition: int | None = None,
) -> str:
    """The SELECT that merges a base relation with changes (see :func:`sql.merged_rows`).

    ``keys`` are source names; ``columns`` the table's columns.
    """
    return sql.merged_rows(
        kind,
        columns=[column.lake_name for column in columns],
        keys=[lake_column(key) for key in keys],
        base=base,
        delta=delta,
        low=min_partition,
        high=max_partition,
    )
