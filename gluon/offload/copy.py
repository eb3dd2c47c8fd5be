"""The initial offload: copy a source table into its lake base table (offload type FULL).

Everything is validated before the first write; without ``-x`` only the plan
is returned. A crashed offload leaves its record in state ``offloading`` and
is simply run again (the first write replaces the table).

Why one module past 400 lines: validation, planning and execution of one offload stay
together, so every check visibly runs before the first write.
"""

from __future__ import annotations

import datetime as dt
import logging
from contextlib import ExitStack
from dataclasses import dataclass, field, replace

from gluon import source as sources
from gluon.capture import ownership
from gluon.config import Settings
from gluon.errors import LakeError, StateError, UsageError
from gluon.faults import fault_point
from gluon.lake import publish, sql, storage, tables
from gluon.lake.session import LakeSession, open_session
from gluon.locks import lifecycle_lock
from gluon.naming import TableRef, lake_names
from gluon.offload.increments import (
    IncrementRequest,
    OffloadType,
    PlannedIncrement,
    plan_increment,
    previous_predicate,
)
from gluon.offload.partitioning import plan_partitioning
from gluon.progress import NullProgress, Progress, ShownLine, plan_lines, timed_step
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.increments import PENDING
from gluon.repo.rejects import RejectedChanges
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect
from gluon.states import TableStatus

log = logging.getLogger(__name__)

OFFLOADED = TableStatus.OFFLOADED
OFFLOADING = TableStatus.OFFLOADING


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadOptions:
    """What the user asked for."""

    table: TableRef
    execute: bool = False
    reset_backend_table: bool = False
    partition_columns: tuple[str, ...] = ()
    partition_granularity: tuple[str, ...] = ()
    increment: IncrementRequest = field(default_factory=IncrementRequest)
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

    def shown(self) -> list[ShownLine]:
        if not self.executed:
            return plan_lines(self.table_key, [step.description for step in self.steps])
        return [
            ShownLine(f"Offloaded {self.table_key}: {self.rows} rows, query it as {self.user_view}")
        ]


@dataclass(slots=True)
class OffloadContext:
    settings: Settings
    options: OffloadOptions
    source: SourceDialect
    spec: TableSpec
    repo: Repository
    record: OffloadedTable
    increment: PlannedIncrement | None = None
    appending: bool = False
    """A later increment of a partially offloaded table (the lake table exists)."""
    replaces: OffloadedTable | None = None
    """The offload --reset-backend-table replaces: it stays queryable until the new one is done."""
    stage_path: str | None = None
    """Where a reset writes its copy before publishing it at the base's one path."""
    reset_run: int = 0
    """A reset's run id (its stage's stamp), recorded with the publishing commit."""


def _refuse_during_compaction(repo: Repository, table_key: str) -> None:
    """An increment writes to the current base: a compaction run that is still open would
    switch the views to a base written before it, and the increment's rows would be lost.

    Raises:
        StateError: a compaction run of the current enablement is unfinished.
    """
    state = repo.incremental.get_state(table_key)
    run = repo.compaction.open_run(table_key, state.enablement_id) if state else None
    if run is not None:
        raise StateError(
            f"compaction run {run.id} of {table_key} is unfinished: finish it with "
            f"`offload -t {table_key} -x --incremental-run-compaction` (or end it with "
            "--incremental-abandon-compaction), then offload the increment"
        )


def validate_offload(
    settings: Settings,
    options: OffloadOptions,
    repo: Repository | None = None,
    *,
    resumes_enable: bool = False,
) -> OffloadContext:
    """Check everything an offload needs; change nothing.

    ``repo``: the command's repository, if it has one open (else it is opened here).
    ``resumes_enable``: the enable command runs again an enable of the table that was killed
    (``gluon.lifecycle.enable_plan``): its reset copies anew under the capture that one made.
    """
    storage.check_writable(settings.lake_root)
    source = sources.connect_configured(settings)
    source.check_connection()
    spec = source.describe_table(options.table)
    if repo is None:  # the first offload starts a repository
        repo = Repository(settings.repo_url, create=True)
    ref = options.table
    existing = repo.get_table(ref.key)
    if (
        existing
        and options.reset_backend_table
        and not resumes_enable
        and repo.incremental.get_state(ref.key)
    ):
        raise StateError(
            f"{ref.key} has incremental update enabled: run with --incremental-updates-disabled "
            "before --reset-backend-table"
        )
    replaces = (
        existing
        if existing is not None and existing.status == OFFLOADED and options.reset_backend_table
        else None
    )
    if options.increment.is_partial:
        _refuse_during_compaction(repo, ref.key)
        context = _validate_increment(
            settings, options, source, spec, repo, None if replaces else existing
        )
        return _replacing(context, replaces)
    if options.increment.offload_type not in (None, OffloadType.FULL):
        raise UsageError(
            "--offload-type=INCREMENTAL needs the rows to offload: --offload-predicate, "
            "--less-than-value, --older-than-date, --partition-names or --subpartition-names"
        )
    if existing and existing.status == OFFLOADED and not options.reset_backend_table:
        raise StateError(
            f"{ref.key} is already offloaded (at {existing.offloaded_at:%Y-%m-%d %H:%M:%S} UTC): "
            "add --reset-backend-table to offload it again from scratch"
            if existing.offloaded_at
            else f"{ref.key} is already offloaded: add --reset-backend-table to offload it again"
        )
    record = _new_record(settings, options, source, spec, offload_type=OffloadType.FULL)
    if existing is None and not options.reset_backend_table:
        _refuse_foreign_base(repo, record)
    return _replacing(OffloadContext(settings, options, source, spec, repo, record), replaces)


def _refuse_foreign_base(repo: Repository, record: OffloadedTable) -> None:
    """A first offload never overwrites a base table another installation made.

    Raises:
        StateError: a Delta table marked by another installation (or table) is at the path.
    """
    found = ownership.lake_table_marker(record.base_path)
    if found is None or storage.delta_version(record.base_path) is None:
        return
    owner = ownership.classify(found, ownership.Marker(repo.installation_id, record.table_key))
    if owner is not ownership.Ownership.OURS:
        raise StateError(
            f"a base table already exists at {record.base_path} and "
            f"{ownership.describe(owner, found)}: use another OFFLOAD_LAKE_ROOT, or add "
            "--reset-backend-table to replace it"
        )


def _replacing(context: OffloadContext, replaces: OffloadedTable | None) -> OffloadContext:
    """A reset stages a new copy inside the base's first folder and publishes it there in one
    overwrite commit when done: a reader holding the path reads the old copy or the new one."""
    if replaces is None:
        return context
    stamp = int(dt.datetime.now(dt.UTC).timestamp() * 1_000_000)
    names = lake_names(context.options.table)
    context.record = replace(context.record, base_path=names.base_path(context.settings.lake_root))
    context.stage_path = names.reset_stage_path(context.settings.lake_root, stamp)
    context.reset_run = stamp
    context.replaces = replaces
    context.appending = False
    return context


def _new_record(
    settings: Settings,
    options: OffloadOptions,
    source: SourceDialect,
    spec: TableSpec,
    *,
    offload_type: str,
) -> OffloadedTable:
    ref = options.table
    partitioning = plan_partitioning(
        spec, list(options.partition_columns), list(options.partition_granularity)
    )
    names = lake_names(ref)
    return OffloadedTable(
        table_key=ref.key,
        source_dialect=source.name,
        source_schema=spec.schema,
        source_table=spec.name,
        lake_schema=names.schema,
        lake_table=names.table,
        base_table=str(names.base_table),
        base_path=names.base_path(settings.lake_root),
        columns=spec.columns,
        primary_key=spec.primary_key,
        partitioning=partitioning,
        offload_type=offload_type,
        status=OFFLOADING,
    )


def _validate_increment(
    settings: Settings,
    options: OffloadOptions,
    source: SourceDialect,
    spec: TableSpec,
    repo: Repository,
    existing: OffloadedTable | None,
) -> OffloadContext:
    """A partial offload: the first increment, or the next one of a partial table."""
    ref = options.table
    previous = repo.increments.increments(ref.key) if existing is not None else []
    planned = plan_increment(source, spec, options.increment, previous)
    appending = existing is not None and existing.status == OFFLOADED
    if existing is not None and existing.offload_type == OffloadType.FULL and appending:
        raise StateError(
            f"{ref.key} is already fully offloaded: a partial offload would copy rows twice "
            "(use --reset-backend-table to start again as a partial offload)"
        )
    if appending and existing is not None:
        requested = options.increment.offload_type
        if requested and OffloadType(existing.offload_type).option_value != requested:
            raise StateError(
                f"{ref.key} was offloaded with offload type "
                f"{OffloadType(existing.offload_type).option_value}; keep using it"
            )
        planned = replace(planned, offload_type=existing.offload_type)
        if options.partition_columns and tuple(
            p.source_column.lower() for p in existing.partitioning
        ) != tuple(c.lower() for c in options.partition_columns):
            raise UsageError(
                "--partition-columns differs from the first offload of this table; leave it out"
            )
        record = existing
    else:
        record = _new_record(settings, options, source, spec, offload_type=planned.offload_type)
    before = previous_predicate(previous)
    if before is not None:
        where, params = before.to_source_sql(spec.columns, source.quote, prefix="old")
        new_where, new_params = planned.predicate.to_source_sql(spec.columns, source.quote)
        overlap = source.count_matching(
            spec, f"({new_where}) AND ({where})", {**params, **new_params}
        )
        if overlap:
            raise StateError(
                f"the requested rows overlap data already offloaded: {overlap} rows of "
                f"{ref.key} match both {planned.predicate.text!r} and earlier offloads"
            )
    return OffloadContext(
        settings, options, source, spec, repo, record, increment=planned, appending=appending
    )


def plan_steps(record: OffloadedTable, increment: PlannedIncrement | None = None) -> list[Step]:
    """The steps an offload of ``record`` runs, in order."""
    parts = ", ".join(p.lake_column for p in record.partitioning) or "none"
    rows = ""
    if increment is not None:
        rows = f"the rows matching {increment.predicate.text!r}"
        if increment.names:  # kind "partitions" or "subpartitions"
            rows = f"{increment.kind} {', '.join(increment.names)} ({rows})"
        rows += " of "
    kind = f" (offload type {OffloadType(record.offload_type).option_value})" if increment else ""
    return [
        Step("record_start", f"record the offload of {record.table_key} in the repository{kind}"),
        Step(
            "copy_rows",
            f"copy {rows}{record.source_schema}.{record.source_table} into Delta table "
            f"{record.base_table} at {record.base_path} (partitions: {parts})",
        ),
        Step("verify_rows", "check the lake row count equals the rows read"),
        Step("create_views", f"register {record.base_table} and create view {record.user_view}"),
        Step("record_done", "mark the offload complete in the repository"),
    ]


def register_user_view(session: LakeSession, record: OffloadedTable) -> None:
    """Register the base table and the plain user view (no incremental update)."""
    tables.register_table(session, record.base_table, record.base_path)
    tables.create_user_view(session, record.user_view, record.columns, record.base_table)


def offload_table(
    settings: Settings, options: OffloadOptions, progress: Progress | None = None
) -> OffloadResult:
    """Offload ``options.table``, or only plan it without ``options.execute``.

    Executing holds the table's lifecycle lock and validates under it, so the checks see
    the state that the copy changes (a compaction may have switched the base meanwhile).

    Raises:
        GluonError: any validation failure (before any change) or a failed step.
        LockHeldError: another command on the table is running (exit code 3).
    """
    if not options.execute:
        return _offload_table(settings, options, progress)
    with lifecycle_lock(
        settings, options.table.key, _command(options), create_repository=True
    ) as repo:
        return _offload_table(settings, options, progress, repo)


def _command(options: OffloadOptions) -> str:
    """The command as a lock holder names it."""
    if options.reset_backend_table:
        return "offload --reset-backend-table"
    if options.increment.is_partial:
        return "offload (partial offload increment)"
    return "offload"


def _offload_table(
    settings: Settings,
    options: OffloadOptions,
    progress: Progress | None,
    repo: Repository | None = None,
) -> OffloadResult:
    context = validate_offload(settings, options, repo)
    steps = plan_steps(context.record, context.increment)
    result = OffloadResult(
        table_key=context.record.table_key,
        steps=steps,
        executed=options.execute,
        user_view=context.record.user_view,
        base_path=context.record.base_path,
    )
    if not options.execute:
        return result
    result.rows = execute_offload(context, progress or NullProgress())
    return result


def execute_offload(context: OffloadContext, progress: Progress) -> int:
    """Copy the rows and record the offload (the caller holds the table's lifecycle lock)."""
    record = context.record
    repo = context.repo
    increment = context.increment
    where: str | None = None
    params: dict[str, object] = {}
    lake_filter: str | None = None
    if increment is not None:
        where, params = increment.predicate.to_source_sql(
            context.spec.columns, context.source.quote
        )
        lake_filter = sql.predicate(increment.predicate, record.columns)
    log.info("offloading %s to %s", record.table_key, record.base_path)
    with timed_step("count_rows") as counting:
        expected = (
            context.source.count_matching(context.spec, where, params)
            if where
            else context.source.count_rows(context.spec)
        )
        counting.detail = f"{expected} rows in the source"
    with ExitStack() as scope:
        with timed_step("start_engine"):
            session = scope.enter_context(open_session(context.settings))
        with timed_step("record_start"):
            increment_id = None
            if increment is not None:
                if context.appending:
                    _check_increment_is_new(session, context, lake_filter)
                elif context.replaces is None:
                    repo.save_table(record)
                increment_id = repo.increments.start(
                    record.table_key,
                    increment.kind,
                    increment.predicate.text,
                    increment.boundary,
                    increment.names,
                )
            elif context.replaces is None:
                repo.save_table(record)
        with (
            timed_step("copy_rows") as copying,
            progress.task(f"copying {record.table_key}", expected) as task,
        ):
            rows = tables.write_batches(
                session,
                context.stage_path or record.base_path,
                record.columns,
                record.partitioning,
                context.source.read_batches(
                    context.spec, batch_rows=context.options.batch_rows, where=where, params=params
                ),
                task=task,
                replace_where=lake_filter if context.appending else None,
            )
            copying.detail = f"{rows} rows"
        with timed_step("verify_rows"):
            _verify(session, record, rows, lake_filter, context.stage_path)
            if context.stage_path is not None:
                _publish_reset(context.stage_path, record.base_path, context.reset_run)
            ownership.mark_lake_table(
                record.base_path, ownership.Marker(repo.installation_id, record.table_key)
            )
            total = session.spark.read.format("delta").load(record.base_path).count()
        if not context.appending:
            with timed_step("create_views"):
                register_user_view(session, record)
    with timed_step("record_done"):
        if increment_id is not None:
            repo.increments.finish(increment_id, rows)
        if context.replaces is not None:
            repo.increments.delete_all(record.table_key, keep=increment_id)
        done = replace(record, status=OFFLOADED, row_count=total, offloaded_at=now())
        repo.save_table(done)
    if not context.appending:
        # The lake is a fresh copy of the source: what insert-only extraction rejected is moot.
        RejectedChanges(repo.engine).clear(record.table_key)
    if context.replaces is not None and context.replaces.base_path != record.base_path:
        storage.remove_table(context.replaces.base_path)
    log.info("offloaded %s: %d rows", record.table_key, rows)
    return rows


def _check_increment_is_new(
    session: LakeSession, context: OffloadContext, lake_filter: str | None
) -> None:
    """Refuse an increment whose rows the lake already holds (unless it is being resumed)."""
    assert context.increment is not None and lake_filter is not None
    pending = [
        i
        for i in context.repo.increments.increments(context.record.table_key)
        if i.status == PENDING and i.predicate == context.increment.predicate.text
    ]
    if pending:
        return  # a crashed run of this very increment: its replaceWhere write is repeated
    tables.register_table(session, context.record.base_table, context.record.base_path)
    base = sql.quote(context.record.base_table)
    present = session.sql(sql.count_where(base, lake_filter)).collect()[0][0]
    if present:
        raise StateError(
            f"the lake already holds {present} rows matching {context.increment.predicate.text!r}: "
            "that data is offloaded already"
        )
    state = context.repo.incremental.get_state(context.record.table_key)
    if state is not None:
        tables.register_table(session, state.delta_table, state.delta_path)
        statement = sql.changes_since(state.delta_table, state.view_min_partition, lake_filter)
        changed = session.sql(statement).collect()[0][0]
        if changed:
            raise StateError(
                f"{changed} captured changes touch rows of {context.increment.predicate.text!r} "
                "before they were offloaded: offloading them now would hide those changes. "
                "Offload data before changing it through incremental update"
            )


def _publish_reset(stage_path: str, base_path: str, run_id: int) -> None:
    """Make a reset's verified copy the base table's next version, at its one path."""
    fault_point("offload.before_reset_publish")
    publish.publish(base_path, stage_path, run_id, publish.RESET_APP)
    fault_point("offload.after_reset_publish")
    # its files now belong to the base (vacuum removes them once no kept version uses them)
    publish.remove_stage_log(stage_path)


def _verify(
    session: LakeSession,
    record: OffloadedTable,
    rows: int,
    lake_filter: str | None,
    location: str | None = None,
) -> None:
    frame = session.spark.read.format("delta").load(location or record.base_path)
    counted = (frame.where(lake_filter) if lake_filter else frame).count()
    if counted != rows:
        raise LakeError(
            f"the lake table {record.base_table} holds {counted} rows but {rows} were read; "
            "run the offload again with --reset-backend-table"
        )
