"""Merge mode IMMEDIATE: each extracted batch is staged, then merged into the base table.

A batch is first written, whole, to the staging table in the load schema (the
location the DEFERRED mode uses for its delta table), one Delta commit that
gives the batch its number: the staging table's version (written by deltalake when
``gluon.lake.staging`` computes the partition columns, else by the engine). The merge into the
base table is one Delta commit carrying a Delta transaction identifier
(``app_id`` = ``gluon:<table key>:<enablement id>``, ``version`` = that staging
version), so
the base table itself records which batch it applied last. A re-run after a
crash looks at the staging table first: a staged batch the base has not
applied is merged (the same batch, never a newer read of the changelog), one
it has applied is only marked done in the source. Nothing is merged twice,
nothing is skipped, and the base table only moves forward.

Measured (deltalake 1.6.6, Sail 0.7.2), what this is built from:

- deltalake's ``DeltaTable.merge`` with ``CommitProperties(app_transactions=
  [Transaction(app_id, version)])`` writes one ``MERGE`` commit holding the
  ``txn`` action; ``DeltaTable.transaction_version(app_id)`` reads it back (None
  before any); delete, update and insert clauses with predicates on the source's
  ``gl_op`` work, ``IS NOT DISTINCT FROM`` matches NULL keys, and an update that
  changes a partition column moves the row to its new partition;
- Sail runs ``MERGE INTO`` on a Delta table (delete, update, insert clauses), but
  has no way to put a transaction identifier in the commit, so a re-run could not
  tell whether its batch was applied: the merge goes through deltalake;
- the base table stays a plain Delta table: deltalake, Polars (``read_delta``)
  and Sail read it; DuckDB's ``delta`` extension is not installed here (it
  downloads on first use, impossible offline).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gluon.errors import LakeError
from gluon.lake import failures, float_stats, staging, storage
from gluon.lake.changes import PARTITION_COLUMN, TRUNCATE, delta_columns
from gluon.lake.checkpoints import checkpoint_if_due, no_post_commit_hooks
from gluon.lake.session import LakeSession
from gluon.lake.sql import quote_part
from gluon.lake.types import struct_type
from gluon.schema import (
    Column,
    PartitionColumn,
    arrow_bool_scalar,
    arrow_int_scalar,
    arrow_repeat,
    arrow_string_scalar,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable
    from deltalake.table import TableMerger

log = logging.getLogger(__name__)

APP_ID_PREFIX = "gluon:"
EXTRACTION_ID_KEY = "gluon.extraction_id"
"""Commit metadata of a merge: the extraction run that wrote it."""
BATCH_KEY = "gluon.staged_batch"
"""Commit metadata of a merge: the staging table version it applied."""
APPLIED_COLUMN = Column("gl_applied", "gluon", "boolean")
"""Staging table: whether the merge applies the change (else it is only removed from the
changelog: an older change of the same key, an insert the insert-only screen refused)."""


def app_id(table_key: str, enablement_id: int | None) -> str:
    """The Delta transaction identifier under which the base table records its batches.

    Per enablement: a re-enabled table has a new staging table whose versions start
    again from 0, while the base table keeps the versions the last enabling recorded.
    """

    return f"{APP_ID_PREFIX}{table_key}:{enablement_id}"


@dataclass(frozen=True, slots=True)
class StagedBatch:
    """The batch in the staging table: its rows and the staging version that numbers it."""

    version: int
    rows: pa.Table

    def complete(self, stage_path: str) -> StagedBatch:
        """The same batch with every column (a merge needs them all)."""
        return StagedBatch(self.version, storage.read_delta(stage_path, self.version))

    @property
    def extraction_id(self) -> int:
        return int(self.rows.column("gl_extraction_id")[0].as_py())


def staged_batch(stage_path: str, columns: Sequence[str] | None = None) -> StagedBatch | None:
    """The batch the staging table holds, with only ``columns`` if given (None: no table, or
    an empty one)."""
    version = _staged_version(stage_path)
    if version is None:
        return None
    rows = storage.read_delta(stage_path, version, columns)
    if rows.num_rows == 0:
        return None
    return StagedBatch(version, rows)


def _staged_version(stage_path: str) -> int | None:
    """The staging table's newest version when it may hold a batch; None when there is no
    table or its newest version names no data file (the empty table enabling creates, or one
    a discard emptied), told from the Delta log alone: reading its rows imports
    ``pyarrow.dataset`` and pandas (a second of the first sync after enabling, issue 28)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(stage_path)
    except TableNotFoundError:
        return None
    return int(table.version()) if table.file_uris() else None


def applied_rows(batch: StagedBatch) -> int:
    """How many changes of a complete staged batch its merge applies (``gl_applied``)."""
    import pyarrow.compute as pc

    return int(pc.sum(batch.rows.column(APPLIED_COLUMN.name)).as_py() or 0)


def open_base(base_path: str) -> DeltaTable:
    """The base table, opened once for :func:`applied_batch` and :func:`merge_batch` (one
    read of its log where each read it)."""
    from deltalake import DeltaTable

    return DeltaTable(base_path)


def applied_batch(base: str | DeltaTable, writer: str) -> int | None:
    """The last staging version the base table (its path, or the table opened) applied for
    ``writer`` (an :func:`app_id`; None: none yet)."""
    from deltalake import DeltaTable

    table = DeltaTable(base) if isinstance(base, str) else base
    version = table.transaction_version(writer)
    return None if version is None else int(version)


def latest_per_key(changes: pa.Table, keys: Sequence[str]) -> pa.Array:
    """For each change, whether it is the one with the highest ``gl_seq`` of its key (NULL
    keys equal each other): the only one of the key the merge applies.

    In Arrow, not row by row: sorted by key then ``gl_seq`` descending, a change is the
    latest of its key where the key differs from the previous row's; the flags are then
    put back in the batch's order (the inverse of the sort permutation).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    # No Python value becomes Arrow here (it would import pandas: gluon.schema).
    count = changes.num_rows
    if count == 0:
        return arrow_repeat(arrow_bool_scalar(False), 0)
    # A tie on gl_seq (ORA_ROWSCN shipping a row again at its SCN) goes to the later run,
    # as in the merging view.
    later_run = (
        [("gl_extraction_id", "descending")] if "gl_extraction_id" in changes.schema.names else []
    )
    order = pc.sort_indices(
        changes,
        sort_keys=[*((key, "ascending") for key in keys), ("gl_seq", "descending"), *later_run],
    )
    starts = arrow_repeat(arrow_bool_scalar(False), count - 1)
    for key in keys:
        values = pc.take(changes.column(key), order).combine_chunks()
        current, previous = values.slice(1), values.slice(0, count - 1)
        # NULL = NULL here (like the merge's IS NOT DISTINCT FROM): NULL against a value
        # differs, NULL against NULL does not.
        one_null = pc.xor(pc.is_null(current), pc.is_null(previous))
        starts = pc.or_(starts, pc.coalesce(pc.not_equal(current, previous), one_null))
    latest_sorted = pa.concat_arrays([arrow_repeat(arrow_bool_scalar(True), 1), starts])
    return pc.take(latest_sorted, pc.sort_indices(order))


def after_truncate(changes: pa.Table, applied: pa.Array) -> pa.Array:
    """``applied`` for a batch that may hold a TRUNCATE: with one, only the last TRUNCATE and
    the applied changes after it (the merge empties the base table first, so nothing
    before it may be applied)."""
    import pyarrow.compute as pc

    ops, seqs = changes.column("gl_op"), changes.column("gl_seq")
    truncates = pc.equal(ops, arrow_string_scalar(TRUNCATE))
    if not pc.any(truncates).as_py():
        return applied
    last = pc.max(pc.filter(seqs, truncates))
    later = pc.and_(applied, pc.greater(seqs, last))
    return pc.or_(later, pc.equal(seqs, last)).combine_chunks()


def unmerged_batch(stage_path: str, base_path: str, writer: str) -> StagedBatch | None:
    """The staged batch the base table has not applied for ``writer`` (None: none staged,
    or merged already), with its ``gl_seq`` only."""
    staged = staged_batch(stage_path, columns=["gl_seq"])
    if staged is None:
        return None
    applied = applied_batch(base_path, writer)
    return staged if applied is None or applied < staged.version else None


def merged_already(stage_path: str, base_path: str, writer: str) -> bool:
    """Whether the base table applied the staging table's newest version (or there is no
    staging table, or it holds nothing): read from the two Delta logs, no rows."""
    version = _staged_version(stage_path)
    if version is None:
        return True
    applied = applied_batch(base_path, writer)
    return applied is not None and applied >= version


def empty_staging(stage_path: str) -> None:
    """Remove every row of the staging table in one commit: a re-run then finds no batch to
    merge (the next batch gets a newer staging version than any the base table recorded)."""
    from deltalake import DeltaTable

    DeltaTable(stage_path).delete()


def stage_batch(
    lake: Callable[[], LakeSession],
    stage_path: str,
    columns: tuple[Column, ...],
    partitioning: tuple[PartitionColumn, ...],
    changes: pa.Table,
    *,
    applied: pa.Array,
    extraction_id: int,
) -> StagedBatch:
    """Replace the staging table's rows with ``changes`` (table columns + gl_seq + gl_op) and
    the base table's partition columns, in one commit; return the batch it holds now.

    Every change read is staged, so a re-run removes exactly them from the changelog;
    ``applied`` marks those the merge applies (the latest of each key, the inserts an
    insert-only screen let through). With deltalake when the partition columns can be
    computed in Arrow (``gluon.lake.staging``), else through the engine (``lake()``).
    """
    import pyarrow as pa

    count = changes.num_rows
    # Built from bytes: a Python value made Arrow imports pandas (gluon.schema).
    changes = (
        changes.append_column(
            "gl_extraction_id", arrow_repeat(arrow_int_scalar(extraction_id), count)
        )
        .append_column(PARTITION_COLUMN, arrow_repeat(arrow_int_scalar(0, pa.int32()), count))
        .append_column(APPLIED_COLUMN.name, applied)
    )
    staged_columns = (*delta_columns(columns), APPLIED_COLUMN)
    derived = staging.arrow_partition_values(changes, columns, partitioning)
    if derived is not None:
        try:
            version, rows = staging.write_stage(
                stage_path, staged_columns, changes, derived, PARTITION_COLUMN
            )
        except Exception as exc:
            if not failures.is_delta_failure(exc):
                raise
            raise LakeError(
                f"writing the Delta table at {stage_path} failed: {failures.describe(exc)}"
            ) from exc
        return StagedBatch(version, rows)
    session = lake()
    frame = session.spark.createDataFrame(changes, schema=struct_type(staged_columns))
    expressions = [f"{part.expression} AS {quote_part(part.lake_column)}" for part in partitioning]
    if expressions:
        frame = frame.selectExpr("*", *expressions)
    # The schema changes with the table's (and the first batch adds the partition columns).
    session.write(
        frame, stage_path, mode="overwrite", partition_by=[PARTITION_COLUMN], overwrite_schema=True
    )
    staged = staged_batch(stage_path)
    if staged is None or staged.rows.num_rows != count:
        raise AssertionError(f"the staging table at {stage_path} does not hold the batch")
    return staged


def merge_batch(
    base_path: str,
    writer: str,
    keys: Sequence[str],
    batch: StagedBatch,
    *,
    insert_only: bool,
    table: DeltaTable | None = None,
) -> int:
    """Apply ``batch`` to the base table in one Delta commit recording it; return the base
    table's version after it (:func:`_merge_batch`). ``table``: the base table opened already
    (its log is not read again).

    Raises:
        LakeError: the Delta library failed (a full disk, missing credentials): nothing was
            committed, and the next extraction merges the staged batch again.
    """
    from deltalake import DeltaTable

    try:
        base = DeltaTable(base_path) if table is None else table
        return _merge_batch(base_path, base, writer, keys, batch, insert_only=insert_only)
    except Exception as exc:
        if not failures.is_delta_failure(exc):
            raise
        raise LakeError(
            f"merging into the Delta table at {base_path} failed: {failures.describe(exc)}"
        ) from exc


def _merge_batch(
    base_path: str,
    base: DeltaTable,
    writer: str,
    keys: Sequence[str],
    batch: StagedBatch,
    *,
    insert_only: bool,
) -> int:
    """Apply ``batch`` to the base table in one Delta commit recording it.

    Merging methods: a delete deletes the key's row, an insert or update replaces or adds it
    (its partition columns too, so a row whose partition changed moves). Insert-only methods
    append every change. A TRUNCATE among the applied changes (:func:`after_truncate`: the
    last one, and only changes after it) empties the base table in the same commit: the merge
    also deletes every row no change matches, an insert-only batch overwrites the table.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import CommitProperties, Transaction, write_deltalake

    float_stats.ensure(base)
    names = [field.name for field in base.schema().fields]
    # A mask, not an expression: filtering by expression imports pyarrow.dataset (start-up).
    rows = batch.rows.filter(batch.rows.column(APPLIED_COLUMN.name))
    truncates = pc.equal(rows.column("gl_op"), arrow_string_scalar(TRUNCATE))
    truncated = bool(pc.any(truncates).as_py())
    rows = rows.filter(pc.invert(truncates))
    properties = CommitProperties(
        app_transactions=[Transaction(writer, batch.version)],
        custom_metadata={
            EXTRACTION_ID_KEY: str(batch.extraction_id),
            BATCH_KEY: str(batch.version),
        },
    )
    hooks = no_post_commit_hooks()  # checkpoints every ten commits, log entries kept
    if insert_only:
        appended = rows.select(names).cast(pa.schema(base.schema().to_arrow()))
        if truncated:
            write_deltalake(
                base,
                appended,
                mode="overwrite",
                commit_properties=properties,
                post_commithook_properties=hooks,
            )
        else:
            write_deltalake(
                base,
                appended,
                mode="append",
                commit_properties=properties,
                post_commithook_properties=hooks,
            )
    elif truncated and rows.num_rows == 0:
        base.delete(commit_properties=properties, post_commithook_properties=hooks)
    else:
        merger = latest_change_merge(base, rows.select([*names, "gl_op"]), names, keys, properties)
        if truncated:  # every row no change after the TRUNCATE matches is gone
            merger = merger.when_not_matched_by_source_delete()
        merger.execute()
    # The table object follows its own commits (merge, write, delete): no second log read.
    version = int(base.version())
    checkpoint_if_due(base_path, version)
    log.info("merged staged batch %d into %s: version %d", batch.version, base_path, version)
    return version


def latest_change_merge(
    base: DeltaTable,
    source: pa.Table,
    names: Sequence[str],
    keys: Sequence[str],
    properties: CommitProperties,
) -> TableMerger:
    """The deltalake merge of ``source`` (one change per key: columns ``names`` and ``gl_op``)
    into ``base`` in one commit carrying ``properties``: a delete (``gl_op = 'D'``) deletes
    the key's row, any other change replaces or adds it with every column in ``names``.

    Shared by IMMEDIATE extraction and in-place compaction; not executed yet (a caller may
    add clauses).
    """
    values = {quoted(name): f"gl_new.{quoted(name)}" for name in names}
    kept = "gl_new.gl_op <> 'D'"
    return (
        base.merge(
            source,
            same_key(keys),
            source_alias="gl_new",
            target_alias="gl_base",
            commit_properties=properties,
            post_commithook_properties=no_post_commit_hooks(),  # callers checkpoint
        )
        .when_matched_delete("gl_new.gl_op = 'D'")
        .when_matched_update(values, kept)
        .when_not_matched_insert(values, kept)
    )


def quoted(name: str) -> str:
    """A column name for deltalake's (DataFusion's) SQL expressions."""
    return '"' + name.replace('"', '""') + '"'


def same_key(keys: Sequence[str]) -> str:
    """The merge condition: every key equal, NULL-safely (as the DEFERRED views compare).

    Each term in parentheses: deltalake's (DataFusion's) parser binds ``IS NOT DISTINCT
    FROM`` looser than ``AND``, so ``a IS NOT DISTINCT FROM b AND c ...`` would read as
    ``a IS NOT DISTINCT FROM (b AND c) ...`` (issue 26).
    """
    return " AND ".join(
        f"(gl_base.{quoted(key)} IS NOT DISTINCT FROM gl_new.{quoted(key)})" for key in keys
    )


@dataclass(frozen=True, slots=True)
class MergeCommit:
    """One Delta commit of the base table written by an extraction's merge."""

    version: int
    extraction_id: int | None
    timestamp_ms: int | None
    operation: str


def recent_merges(base_path: str, limit: int = 5) -> list[MergeCommit]:
    """The newest ``limit`` commits of the base table written by extractions (newest first)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:  # opened once (status over many tables: each log read counts)
        table = DeltaTable(base_path)
    except TableNotFoundError:
        return []
    commits = []
    for entry in table.history(limit * 4):
        run = entry.get(EXTRACTION_ID_KEY)
        if run is None:
            continue
        commits.append(
            MergeCommit(
                int(entry["version"]),
                int(run),
                entry.get("timestamp"),
                str(entry.get("operation", "")),
            )
        )
    return commits[:limit]


def compact_and_vacuum(
    base_path: str, retention_hours: float, keep_versions: Sequence[int] = ()
) -> tuple[int, int]:
    """Rewrite the base table's small files into bigger ones and remove files no version
    within ``retention_hours`` reads, nor any of ``keep_versions`` (retained base versions,
    as a DEFERRED compaction's vacuum keeps them); return (files rewritten, files removed)."""
    from deltalake import DeltaTable

    table: DeltaTable = DeltaTable(base_path)
    metrics = table.optimize.compact(post_commithook_properties=no_post_commit_hooks())
    removed = storage.vacuum(
        base_path, retention_hours=retention_hours, keep_versions=keep_versions
    )
    checkpoint_if_due(base_path)
    return int(metrics.get("numFilesRemoved", 0)), removed
