"""Enabling and disabling incremental update for an offloaded table.

Enabling creates the capture objects in the source first, then (with an
initial offload in the same command) copies the table, then creates the lake
objects. Creating capture first means no change is missed: a change made
during the copy may also be in the copy, and re-applying a full row image is
harmless for merging views. Every step is idempotent; a run that failed
halfway is completed by running the same command again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gluon import capture
from gluon import source as sources
from gluon.compact.abandon import abandon_refusal
from gluon.config import Settings
from gluon.errors import StateError, UnsupportedError, UsageError
from gluon.feeds import FEEDS, capture_objects, object_records
from gluon.lake import storage
from gluon.lake.changes import PARTITION_COLUMN, create_delta_table
from gluon.lake.session import open_session
from gluon.locks import table_lock
from gluon.methods import get_method
from gluon.methods.base import ExtractionMethod, OffloadUseCase
from gluon.naming import TableRef, lake_names
from gluon.offload import (
    OFFLOADED,
    OffloadContext,
    OffloadOptions,
    Step,
    execute_offload,
    plan_steps,
    validate_offload,
)
from gluon.progress import NullProgress, Progress
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import (
    DISABLING,
    ENABLED,
    ENABLING,
    IncrementalState,
    now,
)
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect

log = logging.getLogger(__name__)

OFFLOAD_USE_CASES: dict[str, OffloadUseCase] = {
    "FULL": OffloadUseCase.FULL_100_0,
    "FULL_100_10": OffloadUseCase.FULL_100_10,
    "INCREMENTAL": OffloadUseCase.INCREMENTAL_90_10,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class EnableOptions:
    table: TableRef
    method: str
    key_columns: tuple[str, ...] = ()
    no_verify_primary_key: bool = False
    changelog_table: str | None = None
    execute: bool = False


@dataclass(slots=True)
class IncrementalResult:
    table_key: str
    steps: list[Step]
    executed: bool
    message: str = ""
    rows: int | None = None


def _key_columns(spec: TableSpec, requested: tuple[str, ...]) -> tuple[str, ...]:
    if requested:
        missing = [name for name in requested if not spec.has_column(name)]
        if missing:
            known = ", ".join(column.name for column in spec.columns)
            raise UsageError(
                f"--incremental-key-columns: {spec.name} has no column "
                f"{', '.join(missing)} ({known})"
            )
        return tuple(spec.column(name).name for name in requested)
    if not spec.primary_key:
        raise UsageError(
            f"{spec.schema}.{spec.name} has no primary key: name the columns that identify a row "
            "with --incremental-key-columns=COL1,COL2"
        )
    return spec.primary_key


def _verify_unique(
    source: SourceDialect,
    spec: TableSpec,
    method: type[ExtractionMethod],
    keys: tuple[str, ...],
    options: EnableOptions,
) -> None:
    if not method.verifies_unique_key or options.no_verify_primary_key:
        return
    if spec.primary_key and set(keys) == set(spec.primary_key):
        return  # the database enforces it
    duplicates = source.run_query(
        "count_duplicate_keys", schema=spec.schema, table=spec.name, keys=list(keys)
    )[0][0]
    if duplicates:
        raise UnsupportedError(
            f"{method.name} needs a unique key but {spec.name} has {duplicates} duplicated "
            f"values of ({', '.join(keys)}): choose other --incremental-key-columns, or add "
            "--incremental-no-verify-primary-key if the application guarantees no duplicate inserts"
        )


@dataclass(slots=True)
class _EnablePlan:
    settings: Settings
    repo: Repository
    source: SourceDialect
    spec: TableSpec
    method: type[ExtractionMethod]
    keys: tuple[str, ...]
    objects: list[capture.SourceObjectRef]
    state: IncrementalState
    offload: OffloadContext | None
    record: OffloadedTable | None
    resume: bool


def _plan_enable(
    settings: Settings, options: EnableOptions, offload: OffloadOptions | None
) -> _EnablePlan:
    method = get_method(options.method)
    ref = options.table
    offload_context = validate_offload(settings, offload) if offload else None
    repo = offload_context.repo if offload_context else Repository(settings.repo_url)
    record = repo.get_table(ref.key)
    if offload_context is None and (record is None or record.status != OFFLOADED):
        raise StateError(
            f"{ref.key} is not offloaded yet: offload it first, or add "
            "--incremental-updates-enabled to its initial offload command"
        )
    existing = repo.incremental.get_state(ref.key)
    resume = existing is not None and existing.status == ENABLING
    if existing is not None and not resume:
        if existing.method == method.name:
            raise StateError(f"incremental update is already enabled for {ref.key} ({method.name})")
        raise StateError(
            f"{ref.key} already uses extraction method {existing.method}: disable incremental "
            "update (--incremental-updates-disabled) before choosing another method"
        )
    if offload_context:
        source, spec = offload_context.source, offload_context.spec
        use_case = OFFLOAD_USE_CASES[offload_context.record.offload_type]
    else:
        assert record is not None
        source = sources.connect(settings.require_source_url())
        source.check_connection()
        spec = source.describe_table(ref)
        use_case = OFFLOAD_USE_CASES[record.offload_type]
    if not method.supports_dialect(source.name):
        raise UnsupportedError(
            f"extraction method {method.name} does not work on {source.name} sources"
        )
    if use_case not in method.offload_use_cases:
        raise UnsupportedError(
            f"extraction method {method.name} does not support offload type {use_case.value}"
        )
    method.validate(spec)
    keys = _key_columns(spec, options.key_columns)
    _verify_unique(source, spec, method, keys, options)
    objects = (
        capture_objects(existing)
        if resume and existing
        else capture.plan_source_objects(
            source, ref, method, changelog_table=options.changelog_table
        )
    )
    names = lake_names(ref)
    state = (
        existing
        if resume and existing
        else IncrementalState(
            table_key=ref.key,
            method=method.name,
            status=ENABLING,
            key_columns=keys,
            source_objects=object_records(objects),
            delta_table=str(names.delta_table),
            delta_path=storage.join(
                settings.lake_root, names.schema_dir(names.load_schema), f"{names.table}_changes"
            ),
        )
    )
    return _EnablePlan(
        settings, repo, source, spec, method, keys, objects, state, offload_context, record, resume
    )


def _enable_steps(plan: _EnablePlan) -> list[Step]:
    steps = [
        Step(
            "create_capture",
            f"create {object_.object_type.lower()} {object_.schema}.{object_.name} in the source",
        )
        for object_ in plan.objects
    ]
    if plan.offload:
        steps += plan_steps(plan.offload.record, plan.offload.increment)
    steps += [
        Step(
            "create_delta_table",
            f"create delta table {plan.state.delta_table} at {plan.state.delta_path}",
        ),
        Step(
            "create_views",
            f"create internal delta view generation {plan.state.view_generation} and make the "
            f"user view show the latest state ({plan.method.view_kind.value})",
        ),
        Step("record_enabled", "record incremental update as enabled in the repository"),
    ]
    return steps


def enable_incremental(
    settings: Settings,
    options: EnableOptions,
    offload: OffloadOptions | None = None,
    progress: Progress | None = None,
) -> IncrementalResult:
    """Enable incremental update (with the initial offload when ``offload`` is given).

    Raises:
        GluonError: a refused combination or bad input (before any change), or a failed step.
    """
    plan = _plan_enable(settings, options, offload)
    result = IncrementalResult(plan.state.table_key, _enable_steps(plan), options.execute)
    if not options.execute:
        return result
    with table_lock(settings, plan.state.table_key, "offload"):
        state = plan.state
        if state.enablement_id is None:
            # A new enabling: nothing recorded before it (runs, snapshots) is its own.
            state = state.with_changes(
                enablement_id=plan.repo.incremental.new_enablement(state.table_key, state.method)
            )
        if state.last_scn is None:
            # Positional feeds (ORA_ROWSCN) start from now, before the copy: nothing is missed.
            state = state.with_changes(
                last_scn=FEEDS[plan.method.change_reader].initial_position(plan.source)
            )
        plan.repo.incremental.save_state(state)
        capture.create_source_objects(plan.source, plan.spec, plan.method, plan.objects, plan.keys)
        log.info("created capture objects for %s", plan.state.table_key)
        if plan.offload:
            result.rows = execute_offload(plan.offload, progress or NullProgress())
        record = plan.repo.get_table(plan.state.table_key)
        assert record is not None
        with open_session(settings) as session:
            create_delta_table(session, plan.state.delta_path, record.columns)
        enabled_at = now()
        plan.repo.incremental.save_state(state.with_changes(status=ENABLED, enabled_at=enabled_at))
        plan.repo.incremental.enablement_finished(state.enablement_id, enabled_at=enabled_at)
    result.message = (
        f"incremental update enabled for {plan.state.table_key} with {plan.method.name}; "
        f"query {record.user_view} for the latest state"
    )
    return result


# -- disabling ------------------------------------------------------------------------------


def refuse_unfinished_compaction(repo: Repository, ref: TableRef, state: IncrementalState) -> None:
    """Disable would drop the delta table an unfinished compaction still needs, and the
    next enabling must not find the run.

    Raises:
        StateError: a compaction run of this enablement is unfinished (how to end it).
    """
    run = repo.compaction.open_run(ref.key, state.enablement_id)
    if run is None:
        return
    finish = f"offload -t {ref.key} -x --incremental-run-compaction"
    where = f" (at step {run.current_step})" if run.current_step else ""
    ending = f"finish it with `{finish}`"
    if abandon_refusal(repo, run, state) is None:
        ending += f" or end it with `offload -t {ref.key} -x --incremental-abandon-compaction`"
    raise StateError(
        f"compaction run {run.id} of {ref.key} is unfinished{where}: {ending}, "
        "then disable incremental update"
    )


def disable_incremental(settings: Settings, ref: TableRef, *, execute: bool) -> IncrementalResult:
    """Disable incremental update when nothing is outstanding; drop what enabling created.

    Raises:
        StateError: not enabled, or changes are outstanding (the message says what to run).
    """
    repo = Repository(settings.repo_url)
    state = repo.incremental.get_state(ref.key)
    record = repo.get_table(ref.key)
    if state is None or record is None:
        raise StateError(f"incremental update is not enabled for {ref.key}")
    source = sources.connect(settings.require_source_url())
    source.check_connection()
    objects = capture_objects(state)
    refuse_unfinished_compaction(repo, ref, state)
    if state.status == ENABLED:
        pending = capture.count_changes(source, objects)
        if pending:
            raise StateError(
                f"{ref.key} has {pending} changes in the changelog: run "
                "--incremental-run-extraction "
                "and --incremental-run-compaction first, or drop them with "
                "--incremental-discard-changes -x"
            )
        in_lake = storage.delta_row_count(
            state.delta_path, column=PARTITION_COLUMN, at_least=state.view_min_partition
        )
        if in_lake:
            raise StateError(
                f"{ref.key} has {in_lake} changes in delta table {state.delta_table}: run "
                "--incremental-run-compaction first, or drop them with "
                "--incremental-discard-changes -x"
            )
    steps = [
        Step("drop_capture", f"drop {o.object_type.lower()} {o.schema}.{o.name} from the source")
        for o in reversed(objects)
    ] + [
        Step("drop_delta_table", f"drop delta table {state.delta_table} ({state.delta_path})"),
        Step("record_disabled", f"make {record.user_view} read {record.base_table} directly"),
    ]
    result = IncrementalResult(ref.key, steps, execute)
    if not execute:
        return result
    with table_lock(settings, ref.key, "offload"):
        repo.incremental.save_state(state.with_changes(status=DISABLING))
        capture.drop_source_objects(source, objects)
        storage.remove_table(state.delta_path)
        repo.incremental.delete_state(ref.key)
        repo.incremental.enablement_finished(state.enablement_id, disabled_at=now())
    result.message = (
        f"incremental update disabled for {ref.key}; {record.user_view} reads the base table"
    )
    return result
