"""Delta tables and views of offloaded tables, with the repository as the catalog.

Sail keeps no catalog between sessions, so every session registers the
tables it reads (``CREATE TABLE ... USING delta LOCATION``) and the views on
top of them. Views name catalog tables, never ``delta.`path``` (Sail cannot
read such views back).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

import pyarrow as pa

from gluon.lake.session import LakeSession
from gluon.lake.types import struct_type
from gluon.progress import ProgressTask
from gluon.schema import Column, PartitionColumn, arrow_schema

log = logging.getLogger(__name__)


def quote(name: str) -> str:
    """A Spark SQL identifier (each dotted part back-quoted)."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in name.split("."))


def quote_part(name: str) -> str:
    """One Spark SQL identifier (a column name), back-quoted; dots stay part of it."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ensure_schema(session: LakeSession, schema: str) -> None:
    session.execute(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")


def register_table(session: LakeSession, name: str, location: str) -> None:
    """Make the Delta table at ``location`` known as ``name`` in this session."""
    ensure_schema(session, name.split(".")[0])
    # DROP TABLE leaves the files of a table created with LOCATION (an external table).
    session.execute(f"DROP TABLE IF EXISTS {quote(name)}")
    session.execute(f"CREATE TABLE {quote(name)} USING delta LOCATION {sql_string(location)}")


def create_view(session: LakeSession, name: str, select: str) -> None:
    ensure_schema(session, name.split(".")[0])
    session.execute(f"CREATE OR REPLACE VIEW {quote(name)} AS {select}")


def select_columns(columns: Iterable[Column], source: str) -> str:
    """``SELECT <the table's columns> FROM source`` for a user view ``source``."""
    listed = ", ".join(quote_part(column.view_name) for column in columns)
    return f"SELECT {listed} FROM {quote(source)}"


def create_user_view(
    session: LakeSession, name: str, columns: Iterable[Column], source: str
) -> None:
    """The user view ``name``: the table's columns of ``source`` under their own names.

    The names go in the view's column list, not its body: the engine re-reads a view's
    body without its quotes, so the body names only plain (lake) identifiers.
    """
    listed = list(columns)
    names = ", ".join(quote_part(column.view_name) for column in listed)
    stored = ", ".join(quote_part(column.lake_name) for column in listed)
    create_view_with_columns(session, name, names, f"SELECT {stored} FROM {quote(source)}")


def create_view_with_columns(session: LakeSession, name: str, names: str, select: str) -> None:
    ensure_schema(session, name.split(".")[0])
    session.execute(f"CREATE OR REPLACE VIEW {quote(name)} ({names}) AS {select}")


def write_batches(
    session: LakeSession,
    location: str,
    columns: tuple[Column, ...],
    partitioning: tuple[PartitionColumn, ...],
    batches: Iterator[pa.RecordBatch],
    *,
    task: ProgressTask,
    overwrite_first: bool = True,
    replace_where: str | None = None,
) -> int:
    """Write Arrow batches to the Delta table at ``location``; return the row count.

    The first write replaces the table (a re-run after a crash starts clean),
    later ones append. An empty source still creates the table with its schema.
    With ``replace_where`` (a Spark SQL predicate the rows all satisfy), the first
    write replaces only the rows matching it, so an increment can be re-run.
    """
    schema = struct_type(columns)
    derived = [f"{part.expression} AS {quote_part(part.lake_column)}" for part in partitioning]
    partition_by = [part.lake_column for part in partitioning]
    total = 0
    first = True
    pending: list[pa.RecordBatch] = []

    def flush(batch_list: list[pa.RecordBatch]) -> None:
        nonlocal first
        arrow = pa.Table.from_batches(batch_list, schema=batch_list[0].schema)
        frame = session.spark.createDataFrame(arrow, schema=schema)
        if derived:
            frame = frame.selectExpr("*", *derived)
        mode = "overwrite" if first and overwrite_first else "append"
        session.write(
            frame,
            location,
            mode=mode,
            partition_by=partition_by,
            replace_where=replace_where if mode == "overwrite" else None,
        )
        first = False

    empty_batch: pa.RecordBatch | None = None
    for batch in batches:
        empty_batch = batch
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        total += batch.num_rows
        flush(pending)
        task.advance(batch.num_rows)
        pending = []
    if first:
        schema_of_rows = empty_batch.schema if empty_batch is not None else arrow_schema(columns)
        flush([pa.RecordBatch.from_pylist([], schema=schema_of_rows)])
    log.info("wrote %d rows to %s", total, location)
    return total
