"""Patching lake-only rows: stage lake rows in the source so the updatable view shows them.

The UPDATABLE family patches offloaded data through the updatable view
``SCHEMA_H.TABLE_UV``. Rows that exist only in the lake (offloaded, then
dropped from the source) are not in the application table, so the view cannot
show them by itself. ``offload -t S.T -x --incremental-stage-lake-rows=PRED``
copies the lake rows matching ``PRED`` (the predicate language of
``gluon.predicates``) from the table's user view into its lake-rows table
``SCHEMA_H.TABLE_LK``; the view shows them after the application table's rows.
DML on the view then reaches them: the view's trigger records each change in
the changelog (origin ``V``) and applies it to the staged copy, never to the
application table. The next extraction ships the changes like any other.

Rules of the staging command:

* it replaces the whole content of the lake-rows table, in one source
  transaction (``none`` instead of a predicate just empties it);
* lake rows whose key the application table has are not staged: the view
  shows the application row, and that is the row to change;
* lake rows whose key has changes waiting in the changelog are not staged
  (the lake does not show those changes yet);
* it refuses to run while changes made through the view wait in the
  changelog: the lake does not have them yet, so the staged rows would undo
  them in the view (run an extraction first).

Staged rows stay after an extraction: they already hold what the extraction
shipped, so patching can go on. Only the changelog is shipped, so they are
never shipped twice. They go when the next staging command replaces them, with
``--incremental-stage-lake-rows=none``, or when incremental update is disabled.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from gluon import source as sources
from gluon.capture.objects import SourceObjectRef
from gluon.config import Settings
from gluon.errors import (
    ConfigError,
    LakeError,
    SourceError,
    StateError,
    UnsupportedError,
    UsageError,
)
from gluon.extract.feeds import capture_objects
from gluon.faults import fault_point
from gluon.lake import sql, tables
from gluon.lifecycle.result import IncrementalResult
from gluon.locks import lifecycle_lock
from gluon.methods import get_method, registered_methods
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.offload.copy import Step
from gluon.predicates import parse_predicate
from gluon.progress import NullProgress, Progress
from gluon.read.catalog import lake_session
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import ENABLED, IncrementalState
from gluon.schema import Column
from gluon.source.base import SourceDialect

log = logging.getLogger(__name__)

OPTION = "--incremental-stage-lake-rows"
STAGE_NOTHING = "none"
"""The option value that empties the lake-rows table."""

INSERT_CHUNK = 5_000
"""Rows per executemany call while staging."""

_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")

BIND_TYPES: dict[str, sa.types.TypeEngine[Any]] = {
    "date": sa.Date(),
    "timestamp_ntz": sa.DateTime(),
    "timestamp": sa.DateTime(timezone=True),
}
"""Lake types whose values need SQLAlchemy's bind processing to reach every driver
(sqlite3 takes neither ``Decimal`` nor, without a deprecated adapter, dates)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StageOptions:
    table: TableRef
    predicate: str
    """A predicate of ``gluon.predicates``, or ``none`` to empty the lake-rows table."""
    execute: bool = False


@dataclass(frozen=True, slots=True)
class StagedRows:
    """What one staging run put into the lake-rows table."""

    matched: int
    """Lake rows matching the predicate."""
    in_table: int
    """Of those, rows left out because the application table has their key."""
    pending: int
    """Of those, rows left out because their key has changes waiting in the changelog."""

    @property
    def staged(self) -> int:
        return self.matched - self.in_table - self.pending


@dataclass(slots=True)
class _Plan:
    record: OffloadedTable
    state: IncrementalState
    source: SourceDialect
    staging: SourceObjectRef
    changelog: SourceObjectRef
    where: str | None
    """The predicate as Spark SQL (None: stage nothing)."""


def _find(objects: Sequence[SourceObjectRef], kind: SourceObject) -> SourceObjectRef | None:
    return next((item for item in objects if item.kind is kind), None)


def _methods_with_staging(separator: str = ", ") -> str:
    names = [
        name
        for name, method in sorted(registered_methods().items())
        if method.has_object(SourceObject.LAKE_ROWS_TABLE)
    ]
    return separator.join(names)


def _plan(settings: Settings, options: StageOptions, repo: Repository) -> _Plan:
    key = options.table.key
    repo.require_known(key)
    record = repo.get_table(key)
    state = repo.incremental.get_state(key)
    if record is None or state is None or state.status != ENABLED:
        raise StateError(
            f"incremental update is not enabled for {key}: enable it with "
            "--incremental-updates-enabled and --incremental-extraction-method="
            f"{_methods_with_staging(' or ')}"
        )
    method = get_method(state.method)
    if not method.has_object(SourceObject.LAKE_ROWS_TABLE):
        raise UnsupportedError(
            f"{key} uses extraction method {method.name}, which has no updatable view: {OPTION} "
            f"is for {_methods_with_staging()}"
        )
    objects = capture_objects(state)
    staging = _find(objects, SourceObject.LAKE_ROWS_TABLE)
    changelog = _find(objects, SourceObject.CHANGELOG_TABLE)
    if staging is None or changelog is None:
        raise StateError(
            f"incremental update for {key} was enabled before gluon could stage lake rows: "
            "disable it (--incremental-updates-disabled) and enable it again to create the "
            "lake-rows table"
        )
    text = options.predicate.strip()
    where = None
    if text.lower() != STAGE_NOTHING:
        try:
            predicate = parse_predicate(text)
            where = sql.predicate(predicate, record.columns, over_user_view=True)
            predicate.check_columns(record.columns)
        except UsageError as exc:
            raise UsageError(f"{OPTION}: {exc}") from None
    source = sources.connect_configured(settings)
    if source.name != record.source_dialect:
        raise ConfigError(
            f"GLUON_SOURCE_URL is a {source.name} database, but {key} was offloaded from "
            f"{record.source_dialect}"
        )
    source.check_connection()
    return _Plan(record, state, source, staging, changelog, where)


def _refuse_unextracted_patches(plan: _Plan) -> None:
    rows = plan.source.run_query(
        "count_view_changes", schema=plan.changelog.schema, table=plan.changelog.name
    )
    waiting = int(rows[0][0])
    if waiting:
        raise StateError(
            f"{waiting} changes made through the updatable view of {plan.record.table_key} wait "
            "in the changelog and the lake does not have them yet (staged rows would not show "
            "them): run --incremental-run-extraction first"
        )


def _steps(plan: _Plan) -> list[Step]:
    staging = f"{plan.staging.schema}.{plan.staging.name}"
    if plan.where is None:
        return [Step("unstage", f"delete every row of lake-rows table {staging}")]
    return [
        Step(
            "read_lake_rows",
            f"read the rows of {plan.record.user_view} where {plan.where}",
        ),
        Step(
            "stage_lake_rows",
            f"replace the rows of lake-rows table {staging} with them, less those whose key the "
            "application table has or has changes waiting in the changelog (one transaction)",
        ),
    ]


def stage_lake_rows(
    settings: Settings, options: StageOptions, progress: Progress | None = None
) -> IncrementalResult:
    """Stage the lake rows matching ``options.predicate`` for patching (or empty the stage).

    Without ``options.execute`` only the steps are returned; everything is
    checked first either way.

    Raises:
        UsageError: a malformed predicate, or one naming a column the table lacks.
        StateError: incremental update is not enabled, or view changes await extraction.
        UnsupportedError: the table's method has no updatable view.
        SourceError, LakeError: the source or the lake failed (the stage is unchanged).
        LockHeldError: another command on the table is running (exit code 3).
    """
    if not options.execute:
        return _stage_lake_rows(settings, options, progress, Repository(settings.repo_url))
    command = "offload --incremental-stage-lake-rows"
    with lifecycle_lock(settings, options.table.key, command) as repo:
        return _stage_lake_rows(settings, options, progress, repo)


def _stage_lake_rows(
    settings: Settings, options: StageOptions, progress: Progress | None, repo: Repository
) -> IncrementalResult:
    plan = _plan(settings, options, repo)
    if plan.where is not None:
        _refuse_unextracted_patches(plan)
    key = plan.record.table_key
    result = IncrementalResult(key, _steps(plan), options.execute)
    if not options.execute:
        return result
    staging = f"{plan.staging.schema}.{plan.staging.name}"
    view = _find(capture_objects(plan.state), SourceObject.UPDATABLE_VIEW)
    view_name = f"{view.schema}.{view.name}" if view else staging
    if plan.where is None:
        cleared = _run(plan.source, [(_render(plan, "clear_lake_rows"), [])], what="unstaging")
        result.rows = 0
        result.message = f"{key}: removed {cleared[0]} staged lake rows from {staging}"
        return result
    rows = _read_lake_rows(settings, repo, plan.record, plan.where)
    staged = _replace_staged_rows(plan, rows, progress or NullProgress())
    result.rows = staged.staged
    left_out = []
    if staged.in_table:
        left_out.append(f"{staged.in_table} are still in the application table")
    if staged.pending:
        left_out.append(f"{staged.pending} have changes waiting in the changelog")
    detail = f" ({'; '.join(left_out)}: not staged)" if left_out else ""
    result.message = (
        f"{key}: staged {staged.staged} of {staged.matched} matching lake rows{detail}; "
        f"patch them through {view_name}, then run --incremental-run-extraction"
    )
    return result


# -- the lake side --------------------------------------------------------------------------


def _read_lake_rows(
    settings: Settings, repo: Repository, record: OffloadedTable, where: str
) -> pa.Table:
    """The user view's rows matching ``where`` (Spark SQL built from a parsed predicate)."""
    statement = tables.select_columns(record.columns, record.user_view, where=where)
    with lake_session(settings, repo) as session:
        if record.user_view in session.unavailable:
            raise LakeError(
                f"{record.user_view} is unavailable: {session.unavailable[record.user_view]}"
            )
        frame = session.sql(statement)
        try:
            rows: pa.Table = frame.toArrow()
        except Exception as exc:
            raise LakeError(
                f"reading the lake rows of {record.user_view} failed: {_first_line(exc)}"
            ) from exc
    log.info("read %d lake rows of %s where %s", rows.num_rows, record.user_view, where)
    return rows


# -- the source side ------------------------------------------------------------------------


def _render(plan: _Plan, template: str, **context: Any) -> sa.TextClause:
    text = plan.source.render(
        template,
        schema=plan.staging.schema,
        table=plan.staging.name,
        columns=list(plan.record.columns),
        keys=list(plan.state.key_columns),
        **context,
    )
    return sa.text(text)


def _insert_statement(plan: _Plan) -> tuple[sa.TextClause, list[str]]:
    columns = plan.record.columns
    binds = [f"c{index}" for index in range(len(columns))]
    statement = _render(
        plan, "insert_lake_rows", names=[column.name for column in columns], binds=binds
    )
    typed = [
        sa.bindparam(bind, type_=bind_type)
        for bind, column in zip(binds, columns, strict=True)
        if (bind_type := _bind_type(column)) is not None
    ]
    return statement.bindparams(*typed), binds


def _bind_type(column: Column) -> sa.types.TypeEngine[Any] | None:
    match = _DECIMAL.match(column.lake_type)
    if match:
        return sa.Numeric(int(match.group(1)), int(match.group(2)), asdecimal=True)
    return BIND_TYPES.get(column.lake_type)


def _replace_staged_rows(plan: _Plan, rows: pa.Table, progress: Progress) -> StagedRows:
    """Empty the lake-rows table, insert ``rows``, drop the ones that must not be staged.

    One transaction: on failure the previous stage is kept as it was.
    """
    insert, binds = _insert_statement(plan)
    names = [column.view_name for column in plan.record.columns]
    statements: list[tuple[sa.TextClause, list[dict[str, Any]]]] = [
        (_render(plan, "clear_lake_rows"), [])
    ]
    for start in range(0, rows.num_rows, INSERT_CHUNK):
        chunk = rows.slice(start, INSERT_CHUNK).select(names).to_pylist()
        statements.append((insert, [dict(zip(binds, row.values(), strict=True)) for row in chunk]))
    table = plan.record.spec()
    statements += [
        (
            _render(
                plan, "unstage_matching_keys", other_schema=table.schema, other_table=table.name
            ),
            [],
        ),
        (
            _render(
                plan,
                "unstage_matching_keys",
                other_schema=plan.changelog.schema,
                other_table=plan.changelog.name,
            ),
            [],
        ),
    ]
    with progress.task(f"staging lake rows of {plan.record.table_key}", rows.num_rows) as task:
        counts = _run(
            plan.source,
            statements,
            what=f"staging lake rows in {plan.staging.schema}.{plan.staging.name}",
            advance=task.advance,
        )
    return StagedRows(matched=rows.num_rows, in_table=counts[-2], pending=counts[-1])


def _run(
    source: SourceDialect,
    statements: Sequence[tuple[sa.TextClause, list[dict[str, Any]]]],
    *,
    what: str,
    advance: Callable[[int], None] | None = None,
) -> list[int]:
    """Run the statements in one transaction; return each one's row count.

    A statement with a list of parameter sets runs once per set (executemany).
    """
    counts: list[int] = []
    fault_point("stage.before_source_commit")
    try:
        with source.engine.begin() as connection:
            for statement, params in statements:
                if params:
                    connection.execute(statement, params)
                    counts.append(len(params))
                    if advance is not None:
                        advance(len(params))
                else:
                    counts.append(connection.execute(statement).rowcount)
    except sa.exc.DBAPIError as exc:
        raise SourceError(f"{source.name}: {what} failed: {_first_line(exc)}") from exc
    fault_point("stage.after_source_commit")
    return counts


def _first_line(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip().splitlines()
    return text[0] if text else type(original).__name__


__all__ = ["STAGE_NOTHING", "StageOptions", "StagedRows", "stage_lake_rows"]
