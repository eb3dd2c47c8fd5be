"""The initial offload: copy a source table into its lake base table (offload type FULL).

Everything is validated before the first write; without ``-x`` only the plan
is returned. A crashed offload leaves its record in state ``offloading`` and
is simply run again (the first write replaces the table).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, replace

from gluon import source as sources
from gluon.config import Settings
from gluon.errors import LakeError, StateError
from gluon.lake import storage, tables
from gluon.lake.session import LakeSession, open_session
from gluon.locks import table_lock
from gluon.naming import TableRef, lake_names
from gluon.partitioning import plan_partitioning
from gluon.progress import NullProgress, Progress
from gluon.repo import OffloadedTable, Repository
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect

log = logging.getLogger(__name__)

OFFLOADED = "offloaded"
OFFLOADING = "offloading"


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadOptions:
    """What the user asked for."""

    table: TableRef
    execute: bool = False
    reset_backend_table: bool = False
    partition_columns: tuple[str, ...] = ()
    partition_granularity: tuple[str, ...] = ()
    batch_rows: int = 100_000


@dataclass(frozen=True, slots=True)
class Step:
    """One named step of a plan; ``description`` is what non-execute mode prints."""

    name: str
    description: str


@dataclass(slots=True)
class OffloadResult:
    table_key: str
    steps: list[Step]
    executed: bool
    rows: int | None = None
    user_view: str = ""
    base_path: str = ""


@dataclass(slots=True)
class OffloadContext:
    settings: Settings
    options: OffloadOptions
    source: SourceDialect
    spec: TableSpec
    repo: Repository
    record: OffloadedTable


def validate_offload(settings: Settings, options: OffloadOptions) -> OffloadContext:
    """Check everything an offload needs; change nothing."""
    storage.check_writable(settings.lake_root)
    source = sources.connect(settings.require_source_url())
    source.check_connection()
    spec = source.describe_table(options.table)
    repo = Repository(settings.repo_url)
    ref = options.table
    existing = repo.get_table(ref.key)
    if existing and existing.status == OFFLOADED and not options.reset_backend_table:
        raise StateError(
            f"{ref.key} is already offloaded (at {existing.offloaded_at:%Y-%m-%d %H:%M:%S} UTC): "
            "add --reset-backend-table to offload it again from scratch"
            if existing.offloaded_at
            else f"{ref.key} is already offloaded: add --reset-backend-table to offload it again"
        )
    if existing and options.reset_backend_table and repo.incremental.get_state(ref.key):
        raise StateError(
            f"{ref.key} has incremental update enabled: run with --incremental-updates-disabled "
            "before --reset-backend-table"
        )
    partitioning = plan_partitioning(
        spec, list(options.partition_columns), list(options.partition_granularity)
    )
    names = lake_names(ref)
    record = OffloadedTable(
        table_key=ref.key,
        source_dialect=source.name,
        source_schema=spec.schema,
        source_table=spec.name,
        lake_schema=names.schema,
        lake_table=names.table,
        base_table=str(names.base_table),
        base_path=storage.join(settings.lake_root, names.schema_dir(), f"{names.table}_data"),
        columns=spec.columns,
        primary_key=spec.primary_key,
        partitioning=partitioning,
        offload_type="FULL",
        status=OFFLOADING,
    )
    return OffloadContext(settings, options, source, spec, repo, record)


def plan_steps(record: OffloadedTable) -> list[Step]:
    """The steps an offload of ``record`` runs, in order."""
    parts = ", ".join(p.lake_column for p in record.partitioning) or "none"
    return [
        Step("record_start", f"record the offload of {record.table_key} in the repository"),
        Step(
            "copy_rows",
            f"copy {record.source_schema}.{record.source_table} into Delta table "
            f"{record.base_table} at {record.base_path} (partitions: {parts})",
        ),
        Step("verify_rows", "check the lake row count equals the rows read"),
        Step("create_views", f"register {record.base_table} and create view {record.user_view}"),
        Step("record_done", "mark the offload complete in the repository"),
    ]


def register_user_view(session: LakeSession, record: OffloadedTable) -> None:
    """Register the base table and the plain user view (no incremental update)."""
    tables.register_table(session, record.base_table, record.base_path)
    tables.create_view(
        session, record.user_view, tables.select_columns(record.columns, record.base_table)
    )


def offload_table(
    settings: Settings, options: OffloadOptions, progress: Progress | None = None
) -> OffloadResult:
    """Offload ``options.table``, or only plan it without ``options.execute``.

    Raises:
        GluonError: any validation failure (before any change) or a failed step.
    """
    context = validate_offload(settings, options)
    steps = plan_steps(context.record)
    result = OffloadResult(
        table_key=context.record.table_key,
        steps=steps,
        executed=options.execute,
        user_view=context.record.user_view,
        base_path=context.record.base_path,
    )
    if not options.execute:
        return result
    with table_lock(settings, context.record.table_key, "offload"):
        result.rows = execute_offload(context, progress or NullProgress())
    return result


def execute_offload(context: OffloadContext, progress: Progress) -> int:
    """Copy the rows and record the offload (the caller holds the table's offload lock)."""
    record = context.record
    repo = context.repo
    log.info("offloading %s to %s", record.table_key, record.base_path)
    repo.save_table(record)
    expected = context.source.count_rows(context.spec)
    with open_session(context.settings) as session:
        with progress.task(f"copying {record.table_key}", expected) as task:
            rows = tables.write_batches(
                session,
                record.base_path,
                record.columns,
                record.partitioning,
                context.source.read_batches(context.spec, batch_rows=context.options.batch_rows),
                task=task,
            )
        _verify(session, record, rows)
        register_user_view(session, record)
    done = replace(record, status=OFFLOADED, row_count=rows, offloaded_at=_utcnow())
    repo.save_table(done)
    log.info("offloaded %s: %d rows", record.table_key, rows)
    return rows


def _verify(session: LakeSession, record: OffloadedTable, rows: int) -> None:
    counted = session.spark.read.format("delta").load(record.base_path).count()
    if counted != rows:
        raise LakeError(
            f"the lake table {record.base_table} holds {counted} rows but {rows} were read; "
            "run the offload again with --reset-backend-table"
        )


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)
