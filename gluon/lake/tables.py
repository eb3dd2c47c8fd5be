"""Delta tables and views of offloaded tables, with the repository as the catalog.

Sail keeps no catalog between sessions, so every session registers the
tables it reads (``CREATE TABLE IF NOT EXISTS ... USING delta LOCATION``, only
where the catalog lacks them or points elsewhere: see :func:`register_table`)
and the views on top of them. Views name catalog tables, never ``delta.`path``` (Sail cannot
read such views back).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from gluon.errors import LakeError
from gluon.lake import float_stats, sql, storage
from gluon.lake.session import LakeSession
from gluon.lake.sql import quote, quote_part
from gluon.lake.types import struct_type
from gluon.progress import ProgressTask
from gluon.schema import Column, PartitionColumn, arrow_schema, arrow_type

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


def ensure_schema(session: LakeSession, schema: str) -> None:
    session.execute(sql.create_schema(schema))


def register_table(session: LakeSession, name: str, location: str) -> None:
    """Make the Delta table at ``location`` known as ``name``, safely on a shared catalog.

    Registers ``name`` only when it is missing, re-points it only when it names another
    location, and leaves a registration that already points at ``location`` alone: on a
    Spark cluster with a shared metastore, concurrent extraction, compaction and user
    sessions read these tables, and dropping one (as every session once did) would break
    the others' reads. The embedded engine's catalog is per session, so there every
    session's first call registers the table, as before.

    Measured on Sail 0.7.2 (what this is built from):

    - ``spark.catalog.tableExists('`s`.`t`')`` works (False for a missing table);
    - ``DESCRIBE TABLE EXTENDED`` lists a ``Location`` row for a table (none for a view);
      ``DESCRIBE DETAIL`` and ``DESCRIBE FORMATTED`` do not parse; ``SHOW CREATE TABLE``
      is not implemented;
    - ``CREATE TABLE IF NOT EXISTS ... USING delta LOCATION`` keeps an existing
      registration (even one at another location);
    - ``ALTER TABLE ... SET LOCATION`` is unsupported, and ``CREATE OR REPLACE TABLE ...
      LOCATION`` fails ("schema is not provided"): re-pointing is DROP then CREATE;
    - the catalog keeps no schema of its own (it reads the Delta log at query time), so a
      registration kept across a schema change reads the new columns.
    """
    ensure_schema(session, name.split(".")[0])
    registered = registered_location(session, name)
    if registered is not None and same_location(registered, location):
        return
    if registered is not None:
        log.info("re-pointing %s from %s to %s", name, registered or "a view", location)
        # DROP TABLE leaves the files of a table created with LOCATION (an external table).
        session.execute(sql.drop_table(name))
    # IF NOT EXISTS: a session registering the same table at the same time is no error.
    session.execute(sql.create_table_at(name, location))


def registered_location(session: LakeSession, name: str) -> str | None:
    """Where the catalog's ``name`` points (None: not registered; "": not a Delta table)."""
    if not session.table_exists(quote(name)):
        return None
    try:
        rows = session.sql(sql.describe_extended(name)).collect()
    except LakeError:
        if not session.table_exists(quote(name)):
            return None  # dropped by another session since
        raise
    for row in rows:
        if str(row[0]).strip() == "Location":
            return str(row[1]).strip()
    return ""


def same_location(registered: str, location: str) -> bool:
    """True when a catalog's location names ``location`` (Spark writes ``file:/x`` for ``/x``)."""

    def normal(text: str) -> str:
        if storage.is_local(text):
            return str(storage.local_path(text))
        return text.rstrip("/")

    return normal(registered) == normal(location)


def column_names(session: LakeSession, name: str) -> list[str]:
    """The columns of the catalog table ``name``, in the table's order."""
    return list(session.sql(sql.select_all(quote(name), "false")).columns)


def create_view(session: LakeSession, name: str, select: str) -> None:
    ensure_schema(session, name.split(".")[0])
    session.execute(sql.create_view(name, select))


def select_columns(columns: Iterable[Column], source: str, *, where: str | None = None) -> str:
    """``SELECT <the table's columns> FROM source [WHERE ...]`` for a user view ``source``."""
    return sql.select_columns([column.view_name for column in columns], source, where=where)


def create_user_view(
    session: LakeSession, name: str, columns: Iterable[Column], source: str
) -> None:
    """The user view ``name``: the table's columns of ``source`` under their own names.

    The names go in the view's column list, not its body: the engine re-reads a view's
    body without its quotes, so the body names only plain (lake) identifiers.
    """
    listed = list(columns)
    select = sql.select_columns([column.lake_name for column in listed], source)
    ensure_schema(session, name.split(".")[0])
    session.execute(sql.create_view(name, select, [column.view_name for column in listed]))


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
    import pyarrow as pa

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


def evolve_table(
    session: LakeSession,
    name: str,
    location: str,
    *,
    added: Sequence[Column],
    widened: Sequence[Column],
) -> None:
    """Give the Delta table at ``location`` (registered as ``name``) the ``added`` columns
    and the ``widened`` column types.

    Added columns are a metadata change (deltalake's ``alter.add_columns``: Sail
    has no ``ALTER TABLE ADD COLUMNS``); existing rows read them as NULL until
    their recorded images arrive. A widened type rewrites the table once, in
    one commit (Delta tables here have no type-widening feature).
    """
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema

    table = DeltaTable(location)
    present = {field.name for field in table.schema().fields}
    missing = [c for c in added if c.lake_name not in present]
    if missing:
        fields = pa.schema([pa.field(c.lake_name, arrow_type(c.lake_type)) for c in missing])
        table.alter.add_columns(DeltaSchema.from_arrow(fields).fields)
        table = DeltaTable(location)
        float_stats.ensure(table)  # an added float column: no statistics from now on
    current = pa.schema(table.schema().to_arrow())
    widen = {
        c.lake_name: c.lake_type
        for c in widened
        if c.lake_name in current.names
        and current.field(c.lake_name).type != arrow_type(c.lake_type)
    }
    if not widen:
        return
    register_table(session, name, location)
    listed = [
        sql.cast_as(field, widen[field]) if field in widen else sql.quote_part(field)
        for field in current.names
    ]
    frame = session.sql(sql.select_expressions(sql.quote(name), listed))
    partitions = list(table.metadata().partition_columns)
    session.write(frame, location, mode="overwrite", partition_by=partitions, overwrite_schema=True)
    log.info("rewrote %s with wider types: %s", name, ", ".join(sorted(widen)))


def fill_columns(
    session: LakeSession, name: str, location: str, values: Sequence[tuple[Column, Any]]
) -> None:
    """Set each column of ``values`` to its value (a Python value of its Arrow type) in every
    row of the Delta table at ``location`` (registered as ``name``): one overwrite commit,
    so a run killed before it leaves the table as it was, and running it again is harmless.
    """
    from deltalake import DeltaTable

    if not values:
        return
    table = DeltaTable(location)
    register_table(session, name, location)
    filled = {c.lake_name: sql.typed_literal(value, c.lake_type) for c, value in values}
    listed = [
        f"{filled[field.name]} AS {quote_part(field.name)}"
        if field.name in filled
        else quote_part(field.name)
        for field in table.schema().fields
    ]
    frame = session.sql(sql.select_expressions(sql.quote(name), listed))
    partitions = list(table.metadata().partition_columns)
    session.write(frame, location, mode="overwrite", partition_by=partitions)
    log.info("filled %s in every row of %s", ", ".join(sorted(filled)), name)
