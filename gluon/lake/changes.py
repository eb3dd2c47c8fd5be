"""The delta table (``SCHEMA_LOAD.TABLE_CHANGES``) and the delta views over it.

The delta table holds the table's columns plus ``gl_seq`` (change order),
``gl_op`` (I/U/D, T for a TRUNCATE), ``gl_extraction_id`` and ``gl_control_partition`` (its
Delta partition column, the change ingestion location).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from gluon.errors import LakeError
from gluon.faults import fault_point
from gluon.lake import failures, sql
from gluon.lake.delta_append import append_without_engine, with_change_columns
from gluon.lake.session import LakeSession, retry_commit
from gluon.lake.storage import delta_version
from gluon.lake.types import struct_type
from gluon.schema import Column, arrow_schema, arrow_string_scalar, lake_column

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

CHANGE_COLUMNS: tuple[Column, ...] = (
    Column("gl_seq", "gluon", "bigint"),
    Column("gl_op", "gluon", "string"),
    Column("gl_extraction_id", "gluon", "bigint"),
    Column("gl_control_partition", "gluon", "int"),
)
PARTITION_COLUMN = sql.CONTROL_PARTITION
TRUNCATE = "T"
"""``gl_op`` of a TRUNCATE: every table column NULL; every row as of just before its
``gl_seq`` is gone (base rows and earlier changes), later changes apply to an empty table."""


def holds_truncate(changes: pa.Table) -> bool:
    """Whether a batch (with ``gl_op``) holds a TRUNCATE."""
    import pyarrow.compute as pc

    # Not the literal: a Python value made Arrow imports pandas (gluon.schema).
    truncate = arrow_string_scalar(TRUNCATE)
    return bool(pc.any(pc.equal(changes.column("gl_op"), truncate)).as_py())


def delta_columns(columns: tuple[Column, ...]) -> tuple[Column, ...]:
    """The delta table's columns: the table's, then gluon's."""
    return columns + CHANGE_COLUMNS


def create_delta_table(session: LakeSession, location: str, columns: tuple[Column, ...]) -> None:
    """Create the empty delta table at ``location`` (idempotent: an existing table is kept)."""
    import pyarrow as pa

    if delta_version(location) is not None:
        return
    all_columns = delta_columns(columns)
    empty = pa.Table.from_pylist([], schema=arrow_schema(all_columns))
    frame = session.spark.createDataFrame(empty, schema=struct_type(all_columns))
    session.write(frame, location, mode="overwrite", partition_by=[PARTITION_COLUMN])


def append_changes(
    lake: Callable[[], LakeSession],
    location: str,
    columns: tuple[Column, ...],
    changes: pa.Table,
    *,
    extraction_id: int,
    partition: int,
    skip: BatchRange | None = None,
) -> None:
    """Append ``changes`` (table columns + gl_seq + gl_op) to the delta table in one commit.

    With ``skip``, the engine leaves out the changes the delta table already holds in that
    range (an anti-join on ``gl_seq`` within the append). Without, deltalake appends them
    when the table's schema is theirs (``gluon.lake.delta_append``): no engine to start
    (``lake()`` opens one only when needed).
    """
    # Filled in Arrow: a Python list of the value costs 20 ms per 100k rows.
    changes = with_change_columns(changes, extraction_id, partition, PARTITION_COLUMN)
    if skip is None and append_without_engine(location, changes, PARTITION_COLUMN):
        return
    session = lake()
    frame = _changes_frame(session, delta_columns(columns), changes, skip)
    session.write(frame, location, mode="append", partition_by=[PARTITION_COLUMN])


@dataclass(frozen=True, slots=True)
class ShippedRun:
    """Changes of a batch the delta table already holds, all shipped by one extraction run."""

    extraction_id: int
    changes: int
    first_seq: int
    last_seq: int


@dataclass(frozen=True, slots=True)
class BatchRange:
    """Where the changes of a batch would be if a run shipped them already: ``gl_seq`` in
    [low, high] in the delta table's live control partitions (from ``min_partition``)."""

    delta_table: str
    low: int
    high: int
    min_partition: int

    def shipped(self, session: LakeSession) -> DataFrame:
        """``gl_seq`` and ``gl_extraction_id`` of the changes in the range."""
        return session.sql(
            sql.select_changes(
                self.delta_table, low=self.low, high=self.high, min_partition=self.min_partition
            )
        )


def shipped_by_run(session: LakeSession, batch: BatchRange, seqs: pa.Array) -> list[ShippedRun]:
    """The changes whose ``gl_seq`` is in ``seqs`` that the delta table already holds, per run
    that shipped them. The engine joins the batch with the delta table: the driver gets one
    row per run, never the shipped ``gl_seq`` values themselves."""
    import pyarrow as pa
    from pyspark.sql import functions as F

    present = batch.shipped(session).alias("gl_lake")
    if not present.limit(1).collect():
        return []  # the usual case: nothing in the range, so the batch need not be sent
    spark = session.spark
    wanted = spark.createDataFrame(
        pa.table({"gl_seq": seqs}), schema=struct_type(CHANGE_COLUMNS[:1])
    ).alias("gl_new")
    same_seq = F.col("gl_lake.gl_seq") == F.col("gl_new.gl_seq")
    rows = (
        present.join(wanted, same_seq, "left_semi")
        .groupBy("gl_extraction_id")
        .agg(
            F.count_distinct("gl_seq").alias("changes"),
            F.min("gl_seq").alias("first_seq"),
            F.max("gl_seq").alias("last_seq"),
        )
        .collect()
    )
    return [
        ShippedRun(int(row[0]), int(row[1]), int(row[2]), int(row[3]))
        for row in sorted(rows, key=lambda row: int(row[0]))
    ]


def _changes_frame(
    session: LakeSession, columns: tuple[Column, ...], changes: pa.Table, skip: BatchRange | None
) -> DataFrame:
    """``changes`` (``columns``) as a DataFrame, less those in ``skip`` (anti-join on
    ``gl_seq``)."""
    from pyspark.sql import functions as F

    frame = session.spark.createDataFrame(changes, schema=struct_type(columns))
    if skip is None:
        return frame
    present = skip.shipped(session).select("gl_seq").alias("gl_lake")
    same_seq = F.col("gl_new.gl_seq") == F.col("gl_lake.gl_seq")
    return frame.alias("gl_new").join(present, same_seq, "left_anti")


def without_shipped(
    session: LakeSession, columns: tuple[Column, ...], changes: pa.Table, skip: BatchRange
) -> pa.Table:
    """``changes`` (table columns + gl_seq + gl_op) less those already in ``skip``; the engine
    filters. For callers that must see the rows before they are appended."""
    kept = _changes_frame(session, columns + CHANGE_COLUMNS[:2], changes, skip).toArrow()
    return kept.select(changes.schema.names).cast(changes.schema)


def keys_in_lake(
    session: LakeSession,
    columns: tuple[Column, ...],
    base_path: str,
    delta_path: str | None,
    min_partition: int,
    keys: list[str],
    inserts: pa.Table,
    *,
    truncated: bool = False,
) -> set[tuple[Any, ...]]:
    """The ``keys`` values of ``inserts`` the user view already shows (NULL-safe, like the
    views), as tuples in the order of ``keys`` (lake names of some of the table's ``columns``).

    ``delta_path``: the delta table (None: merge mode IMMEDIATE, where the base table holds
    every shipped change). ``truncated``: its partitions from ``min_partition`` may hold a
    TRUNCATE; then only inserts after the last one count (the view shows nothing before it).
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
    if delta_path is None:
        lake = base.alias("gl_lake")
    else:
        delta = (
            spark.read.format("delta")
            .load(delta_path)
            .where(sql.inserted_since(min_partition))
            .select(*quoted, "gl_seq")
        )
        last_truncate = _last_truncate(session, delta_path, min_partition) if truncated else None
        if last_truncate is not None:
            lake = delta.where(F.col("gl_seq") > last_truncate).select(*quoted).alias("gl_lake")
        else:
            lake = base.unionByName(delta.select(*quoted)).alias("gl_lake")
    condition = reduce(
        lambda left, right: left & right,
        [
            F.col(f"gl_new.{sql.quote(name)}").eqNullSafe(F.col(f"gl_lake.{sql.quote(name)}"))
            for name in keys
        ],
    )
    found = wanted.alias("gl_new").join(lake, condition, "left_semi").toArrow()
    return {tuple(row[name] for name in keys) for row in found.to_pylist()}


def _last_truncate(session: LakeSession, delta_path: str, min_partition: int) -> int | None:
    """The highest ``gl_seq`` of a TRUNCATE in the delta table from ``min_partition``."""
    from pyspark.sql import functions as F

    found = (
        session.spark.read.format("delta")
        .load(delta_path)
        .where(sql.truncates_since(min_partition))
        .agg(F.max("gl_seq"))
        .collect()
    )
    return None if found[0][0] is None else int(found[0][0])


def view_sql(
    kind: str,
    *,
    columns: tuple[Column, ...],
    keys: tuple[str, ...],
    base: str,
    delta: str,
    min_partition: int,
    max_partition: int | None = None,
    truncated: bool = False,
) -> str:
    """The SELECT that merges a base relation with changes (see :func:`sql.merged_rows`).

    ``keys`` are source names; ``columns`` the table's columns; ``truncated``: the changes
    read may hold a TRUNCATE (``IncrementalState.truncates_from``).
    """
    return sql.merged_rows(
        kind,
        columns=[column.lake_name for column in columns],
        keys=[lake_column(key) for key in keys],
        base=base,
        delta=delta,
        low=min_partition,
        high=max_partition,
        truncated=truncated,
    )


def drop_control_partitions(location: str, high: int) -> None:
    """Delete control partitions up to ``high`` from the delta table at ``location``: one
    deltalake commit removing their files whole, again if it lost a commit race; no engine
    to start for it (a compaction merged without one, ``gluon.lake.compact_merge``).

    Raises:
        LakeError: the Delta library failed (nothing was deleted).
    """
    from deltalake import DeltaTable

    fault_point("lake.before_execute")
    try:
        retry_commit(lambda: DeltaTable(location).delete(sql.up_to_partition(high)))
    except Exception as exc:
        if not failures.is_delta_failure(exc):
            raise
        raise LakeError(
            f"deleting compacted changes from the Delta table at {location} failed: "
            f"{failures.describe(exc)}"
        ) from exc
    fault_point("lake.after_execute")
