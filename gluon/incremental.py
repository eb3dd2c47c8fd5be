"""Enabling and disabling incremental update for an offloaded table.

Enabling creates the capture objects in the source first, then (with an
initial offload in the same command) copies the table, then creates the lake
objects. Creating capture first means no change is missed: a change made
during the copy may also be in the copy, and re-applying a full row image is
harmless for merging views. A replication slot is exact instead
(``SNAPSHOT_KINDS``): the copy reads under the snapshot the slot exports at its
creation, so each change is in the copy or in the slot, never both. Every step is idempotent; a
run that failed halfway is completed by running the same command again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace

from gluon import capture, ownership
from gluon import source as sources
from gluon.compact.abandon import abandon_refusal
from gluon.config import Settings
from gluon.errors import GluonError, LakeError, StateError, UnsupportedError, UsageError
from gluon.faults import fault_raise
from gluon.feeds import FEEDS, capture_objects, object_records
from gluon.increments import OffloadType
from gluon.lake import storage
from gluon.lake.changes import PARTITION_COLUMN, create_delta_table
from gluon.lake.session import open_session
from gluon.locks import lifecycle_lock
from gluon.methods import get_method, registered_methods
from gluon.methods.base import SNAPSHOT_KINDS, ExtractionMethod, SourceObject, ViewKind
from gluon.naming import TableRef, lake_names
from gluon.offload import (
    OFFLOADED,
    OFFLOADING,
    OffloadContext,
    OffloadOptions,
    Step,
    execute_offload,
    plan_steps,
    validate_offload,
)
from gluon.progress import NullProgress, Progress, ShownLine, plan_lines, sentence, timed_step
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.incremental import (
    DISABLING,
    ENABLED,
    ENABLING,
    IncrementalState,
)
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect
from gluon.states import MergeMode

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnableOptions:
    table: TableRef
    method: str
    key_columns: tuple[str, ...] = ()
    no_verify_primary_key: bool = False
    changelog_table: str | None = None
    execute: bool = False
    take_over_objects: bool = False
    """Drop and re-create leftover capture objects and delta tables gluon did not make here."""
    recreate_capture_objects: bool = False
    """Re-create the capture objects of an enabled table that are missing (and refresh the rest)."""
    merge_mode: MergeMode | None = None
    """``--incremental-merge-mode`` (None: not given; a new enabling is DEFERRED)."""


@dataclass(slots=True)
class IncrementalResult:
    table_key: str
    steps: list[Step]
    executed: bool
    message: str = ""
    rows: int | None = None

    def shown(self) -> list[ShownLine]:
        if not self.executed:
            return plan_lines(self.table_key, [step.description for step in self.steps])
        return [sentence(self.message, otherwise="Done")]


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
    """Refuse an insert-only method unless the source keeps ``keys`` unique.

    The delta view of an insert-only method appends every insert, so a key the
    source lets in twice would show twice in the lake. A one-time look at the
    data proves nothing about later inserts: only a constraint does. A unique
    constraint whose columns allow NULL lets NULL keys repeat, so it counts
    only when every key column is NOT NULL.
    """
    if not method.verifies_unique_key or options.no_verify_primary_key:
        return
    wanted = {key.lower() for key in keys}
    primary = {name.lower() for name in spec.primary_key}
    for unique in source.unique_keys(spec):
        if {name.lower() for name in unique} != wanted:
            continue
        if wanted == primary or not any(spec.column(key).nullable for key in keys):
            return
    listed = ", ".join(keys)
    raise UnsupportedError(
        f"{method.name} needs a primary key or unique constraint on exactly ({listed}) with "
        f"NOT NULL columns, and {spec.schema}.{spec.name} has none: add one in the source, or "
        "pass --incremental-no-verify-primary-key if the application never inserts a key twice "
        "(a duplicate insert then shows the key twice in the lake)"
    )


def _verify_key_not_null(source: SourceDialect, spec: TableSpec, keys: tuple[str, ...]) -> None:
    """Refuse key columns that allow NULL (issue 26): the lake compares keys NULL-safely, so
    every row with a NULL key would be one row there, where the source may hold many.
    Checked before any capture object exists, for every method.
    """
    nullable = source.nullable_key_columns(spec, keys)
    if not nullable:
        return
    listed = ", ".join(nullable)
    raise UnsupportedError(
        f"key column{'s' if len(nullable) > 1 else ''} {listed} of {spec.schema}.{spec.name} "
        f"{'allow' if len(nullable) > 1 else 'allows'} NULL, and the lake takes every row "
        f"with a NULL key for one row: make {listed} NOT NULL in the source, or name NOT "
        f"NULL key columns with --incremental-key-columns{source.one_null_key_hint}"
    )


def _verify_key_identifies_rows(
    source: SourceDialect,
    spec: TableSpec,
    method: type[ExtractionMethod],
    keys: tuple[str, ...],
    options: EnableOptions,
) -> None:
    """Merging methods keep one row per key: key columns shared by rows would lose rows.

    The primary key needs no check (the database enforces it); other key
    columns are checked against the data.
    """
    if method.view_kind is not ViewKind.MERGE or options.no_verify_primary_key:
        return
    if spec.primary_key and set(keys) == set(spec.primary_key):
        return
    duplicates = source.run_query(
        "count_duplicate_keys", schema=spec.schema, table=spec.name, keys=list(keys)
    )[0][0]
    if duplicates:
        raise UnsupportedError(
            f"{method.name} keeps one row per key but {spec.name} has {duplicates} duplicated "
            f"values of ({', '.join(keys)}), so the lake would lose rows: name columns that "
            "identify a row with --incremental-key-columns, or add "
            "--incremental-no-verify-primary-key if the application guarantees them unique"
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
    marker: ownership.Marker
    taken_over: list[capture.SourceObjectRef]
    """Existing objects to drop and re-create as ours (``--incremental-take-over-objects``)."""


def grant_scripts(
    settings: Settings, ref: TableRef, method_name: str, changelog_table: str | None
) -> IncrementalResult:
    """The grant scripts a DBA runs so gluon's user can enable ``method_name`` on ``ref``
    (``--incremental-print-grants``); nothing is read from or sent to the source.

    Raises:
        UsageError: an unknown method.
        UnsupportedError: the source needs no script, or the method does not work on it.
    """
    method = get_method(method_name)
    source = sources.connect_configured(settings)
    try:
        if not method.supports_dialect(source.name):
            raise UnsupportedError(
                f"extraction method {method.name} does not work on {source.name} sources"
            )
        objects = capture.named_source_objects(source, ref, method, changelog_table=changelog_table)
        schemas = {o.kind: o.schema for o in objects}
        hybrid = schemas.get(SourceObject.CHANGELOG_TRIGGER) or next(
            (o.schema for o in objects if o.object_type != "SCHEMA"), None
        )
        scripts = source.grant_scripts(
            ref, method, hybrid, schemas.get(SourceObject.CHANGELOG_TABLE)
        )
    finally:
        source.engine.dispose()
    if not scripts:
        raise UnsupportedError(
            f"{source.name} sources need no grant script: docs/operations.md section 13 says "
            "which privileges gluon's user needs"
        )
    parts = [
        f"-- {title}\n" + "\n".join(f"{statement};" for statement in statements)
        for title, statements in scripts.items()
    ]
    message = f"Grants for {method.name} on {ref.key}:\n" + "\n\n".join(parts)
    return IncrementalResult(table_key=ref.key, steps=[], executed=True, message=message)


def _preflight(
    source: SourceDialect,
    spec: TableSpec,
    method: type[ExtractionMethod],
    objects: list[capture.SourceObjectRef],
) -> None:
    """Refuse before anything is created when the source lacks what enabling needs: one
    line per missing item, each with the statement that gives it (Oracle's privileges,
    quota, readable parameters; other dialects say so in their own statements).

    Raises:
        UnsupportedError: something is missing.
    """
    schemas = {o.kind: o.schema for o in objects}
    hybrid = schemas.get(SourceObject.CHANGELOG_TRIGGER) or next(
        (o.schema for o in objects if o.object_type != "SCHEMA"), None
    )
    create_schema = SourceObject.HYBRID_SCHEMA in schemas
    problems = source.preflight(
        spec,
        method,
        hybrid,
        create_schema=create_schema,
        changelog_schema=schemas.get(SourceObject.CHANGELOG_TABLE),
    )
    if problems:
        raise UnsupportedError(
            f"enabling {method.name} on {spec.schema}.{spec.name} needs what the {source.name} "
            f"source does not give yet ({len(problems)}; nothing was created):\n"
            + "\n".join(f"- {problem}" for problem in problems)
        )


def _plan_enable(
    settings: Settings,
    options: EnableOptions,
    offload: OffloadOptions | None,
    repo: Repository | None = None,
) -> _EnablePlan:
    method = get_method(options.method)
    ref = options.table
    offload_context = validate_offload(settings, offload, repo) if offload else None
    if offload_context:
        repo = offload_context.repo
    elif repo is None:
        repo = Repository(settings.repo_url)
    record = repo.get_table(ref.key)
    if offload_context is None and (record is None or record.status != OFFLOADED):
        raise StateError(
            f"{ref.key} is not offloaded yet: offload it first, or add "
            "--incremental-updates-enabled to its initial offload command"
        )
    existing = repo.incremental.get_state(ref.key)
    resume = existing is not None and (
        existing.status == ENABLING or _enable_interrupted(repo, existing, method.name)
    )
    if existing is not None:
        _refuse_mode_switch(existing, options.merge_mode)
    merge_mode = options.merge_mode or MergeMode.DEFERRED
    if merge_mode is MergeMode.IMMEDIATE and not FEEDS[method.change_reader].merges_batches:
        # The merge records each batch once; a feed that re-reads row images has no batch.
        raise UnsupportedError(
            f"--incremental-merge-mode=IMMEDIATE needs one of {_batch_methods()}; "
            f"{method.name} reads changes by position: use --incremental-merge-mode=DEFERRED"
        )
    if existing is not None and not resume:
        if existing.method == method.name:
            raise StateError(_already_enabled(settings, existing))
        raise StateError(
            f"{ref.key} already uses extraction method {existing.method}: disable incremental "
            "update (--incremental-updates-disabled) before choosing another method"
        )
    if offload_context:
        source, spec = offload_context.source, offload_context.spec
        use_case = OffloadType(offload_context.record.offload_type).use_case
    else:
        assert record is not None
        source = sources.connect_configured(settings)
        source.check_connection()
        spec = source.describe_table(ref)
        use_case = OffloadType(record.offload_type).use_case
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
    _verify_key_not_null(source, spec, keys)
    _verify_key_identifies_rows(source, spec, method, keys, options)
    FEEDS[method.change_reader].check_enable(source, spec, keys, method)
    objects = (
        capture_objects(existing)
        if resume and existing
        else capture.plan_source_objects(
            source, ref, method, changelog_table=options.changelog_table
        )
    )
    _preflight(source, spec, method, objects)
    marker = ownership.Marker(repo.installation_id, ref.key)
    taken_over = _check_existing_objects(
        source,
        spec,
        objects,
        marker,
        options.take_over_objects,
        recorded=bool(resume and existing),
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
            delta_path=names.delta_path(settings.lake_root),
            merge_mode=merge_mode.value,
        )
    )
    _check_delta_table(state.delta_path, marker, options.take_over_objects, resume=resume)
    return _EnablePlan(
        settings,
        repo,
        source,
        spec,
        method,
        keys,
        objects,
        state,
        offload_context,
        record,
        resume,
        marker,
        taken_over,
    )


def _batch_methods() -> str:
    """The methods whose changes merge mode IMMEDIATE can merge (numbered batches)."""
    return ", ".join(
        name
        for name, method in registered_methods().items()
        if FEEDS[method.change_reader].merges_batches
    )


def not_recommended(spec: TableSpec, method: type[ExtractionMethod]) -> str:
    """Why the spec does not recommend ``method`` for ``spec`` ("": nothing against it).

    Table 3, note 12: a (sub)partitioned table offloaded FULL can be enabled with a method
    that captures every DML on the table, bulk loads included, but it is not recommended.
    (These methods support only the FULL offload types.)
    """
    if not spec.partition_columns or not method.tracks_all_table_dml():
        return ""
    return (
        f"{spec.schema}.{spec.name} is a partitioned table offloaded FULL: {method.name} "
        "captures every change to it, bulk loads included, which is not recommended "
        "(incremental update is not built for large partitioned tables); offload its "
        "partitions with --partition-names or --offload-predicate and replay later changes "
        f"with a method of the updatable view ({_view_methods()})"
    )


def _view_methods() -> str:
    """The methods that capture only what goes through their updatable view."""
    methods = registered_methods().values()
    return ", ".join(method.name for method in methods if not method.tracks_all_table_dml())


def _refuse_mode_switch(existing: IncrementalState, wanted: MergeMode | None) -> None:
    """Switching the merge mode of an enabled table goes through disable and re-enable.

    Raises:
        StateError: ``wanted`` is another mode than the table's (how to switch).
    """
    current = existing.merge_mode or MergeMode.DEFERRED.value  # a row older than the column
    if wanted is None or wanted.value == current:
        return
    raise StateError(
        f"{existing.table_key} uses --incremental-merge-mode={current}: to switch "
        f"to {wanted.value}, disable incremental update (--incremental-updates-disabled) and "
        "enable it again with the new mode"
    )


def _check_existing_objects(
    source: SourceDialect,
    spec: TableSpec,
    objects: list[capture.SourceObjectRef],
    marker: ownership.Marker,
    take_over: bool,
    *,
    legacy: bool = False,
    recorded: bool = False,
) -> list[capture.SourceObjectRef]:
    """Refuse existing objects gluon did not make for this table here; return those to take over.

    A schema is never refused: several tables (and installations) may share one.

    Raises:
        StateError: an object exists that this installation cannot use (the message says whose
            it is and how to go on).
    """
    taken_over: list[capture.SourceObjectRef] = []
    existing = capture.existing_objects(
        source, objects, marker, spec, unmarked_are_ours=legacy, recorded=recorded
    )
    for found in existing:
        if found.item.kind is SourceObject.HYBRID_SCHEMA:
            continue
        if not found.adoptable(take_over):
            raise StateError(found.refusal())
        if found.ownership is not ownership.Ownership.OURS:
            log.warning(
                "taking over %s: %s", found.label, ownership.describe(found.ownership, found.marker)
            )
            taken_over.append(found.item)
    return taken_over


def _check_delta_table(
    location: str, marker: ownership.Marker, take_over: bool, *, resume: bool
) -> None:
    """Refuse a delta table at ``location`` that another installation (or table) made.

    An unmarked one is ours when resuming this installation's own enable (a crash
    between creating and marking it).

    Raises:
        StateError: the delta table exists and is not this installation's.
    """
    if storage.delta_version(location) is None:
        return
    found = ownership.lake_table_marker(location)
    owner = ownership.classify(found, marker)
    if owner is ownership.Ownership.OURS or take_over or (resume and found is None):
        return
    raise StateError(
        f"a delta table already exists at {location} and "
        f"{ownership.describe(owner, found)}: disable incremental update there first, move "
        f"it away, or add {ownership.TAKE_OVER_OPTION} to replace it"
    )


def _enable_steps(plan: _EnablePlan) -> list[Step]:
    steps = [
        Step(
            "create_capture",
            f"create {object_.object_type.lower()} {object_.display_name} in the source"
            + (
                " (the copy reads the snapshot it exports)"
                if plan.offload and object_.kind in SNAPSHOT_KINDS
                else ""
            ),
        )
        for object_ in plan.objects
    ]
    if plan.offload:
        steps += plan_steps(plan.offload.record, plan.offload.increment)
    steps += [
        Step(
            "create_delta_table",
            f"create {_delta_table_role(plan.state)} {plan.state.delta_table} at "
            f"{plan.state.delta_path}",
        ),
        Step("record_enabled", "record incremental update as enabled in the repository"),
    ]
    return steps


def enable_incremental(
    settings: Settings,
    options: EnableOptions,
    offload: OffloadOptions | None = None,
    progress: Progress | None = None,
    warn: Callable[[str], None] | None = None,
) -> IncrementalResult:
    """Enable incremental update (with the initial offload when ``offload`` is given).

    Executing holds the table's lifecycle lock and plans under it. ``warn`` receives, once,
    what the spec does not recommend about the combination (before anything runs).

    Raises:
        GluonError: a refused combination or bad input (before any change), or a failed step.
        LockHeldError: another command on the table is running (exit code 3).
    """
    if not options.execute:
        return _enable_incremental(settings, options, offload, progress, warn=warn)
    with lifecycle_lock(
        settings,
        options.table.key,
        "offload --incremental-updates-enabled",
        create_repository=offload is not None,
    ) as repo:
        return _enable_incremental(settings, options, offload, progress, repo, warn=warn)


def _enable_incremental(
    settings: Settings,
    options: EnableOptions,
    offload: OffloadOptions | None,
    progress: Progress | None,
    repo: Repository | None = None,
    *,
    warn: Callable[[str], None] | None = None,
) -> IncrementalResult:
    plan = _plan_enable(settings, options, offload, repo)
    advice = not_recommended(plan.spec, plan.method)
    if advice:
        log.warning("%s", advice)
        if warn is not None:
            warn(advice)
    result = IncrementalResult(plan.state.table_key, _enable_steps(plan), options.execute)
    if not options.execute:
        return result
    try:
        if plan.offload:
            _refuse_unfit_values(plan)
        return _execute_enable(settings, plan, result, options.take_over_objects, progress)
    except Exception as exc:
        if plan.state.status == ENABLED:
            raise  # only dating the enablement was left: the enable itself stands
        if plan.repo.incremental.get_state(plan.state.table_key) is None:
            raise  # failed before recording anything: nothing of it exists
        undone = _undo_failed_enable(plan)
        if isinstance(exc, GluonError) and exc.args:
            exc.args = (f"{exc.args[0]}; {undone}", *exc.args[1:])
        raise


def _execute_enable(
    settings: Settings,
    plan: _EnablePlan,
    result: IncrementalResult,
    take_over_objects: bool,
    progress: Progress | None,
) -> IncrementalResult:
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
    if plan.taken_over:
        capture.drop_source_objects(plan.source, plan.taken_over)
    if take_over_objects and ownership.lake_table_marker(state.delta_path) != (plan.marker):
        storage.remove_table(state.delta_path)
    with ExitStack() as exporting:
        with timed_step("create_capture"):
            slot = _slot_to_export(plan)
            if slot is not None:
                # Open until the copy is done: the copy reads under the slot's snapshot.
                exporting.enter_context(capture.slot_exporting_snapshot(plan.source, slot))
            capture.create_source_objects(
                plan.source, plan.spec, plan.method, plan.objects, plan.keys, plan.marker
            )
        log.info("created capture objects for %s", plan.state.table_key)
        if plan.offload:
            result.rows = execute_offload(plan.offload, progress or NullProgress())
    # Tests fail an enable here for real, after its capture objects (and copy) exist.
    fault_raise("enable.fail_after_capture", LakeError)
    record = plan.repo.get_table(plan.state.table_key)
    if record is None:
        raise StateError(f"the repository has no record of {plan.state.table_key} to enable")
    with timed_step("create_delta_table"):
        with open_session(settings) as session:
            create_delta_table(session, plan.state.delta_path, record.columns)
        ownership.mark_lake_table(plan.state.delta_path, plan.marker)
    with timed_step("record_enabled"):
        enabled_at = now()
        plan.repo.incremental.save_state(state.with_changes(status=ENABLED, enabled_at=enabled_at))
        plan.repo.incremental.enablement_finished(state.enablement_id, enabled_at=enabled_at)
    offloaded = f" after offloading {result.rows} rows" if plan.offload else ""
    result.message = (
        f"incremental update enabled for {plan.state.table_key} with {plan.method.name}"
        f"{offloaded}; query {record.user_view} for the latest state"
    )
    if state.merge_mode == MergeMode.IMMEDIATE:
        result.message += (
            f" (merge mode IMMEDIATE: {record.user_view} is the Delta table at "
            f"{record.base_path}, current after every extraction for any Delta reader)"
        )
    return result


def _refuse_unfit_values(plan: _EnablePlan) -> None:
    """Refuse to enable (and copy) a table holding values the lake cannot take, before any
    capture object exists: the copy would fail on them after the trigger (or slot) had
    captured changes, and those changes would hold the value again.

    Raises:
        UsageError: the table holds such values (one line: where, and what to do).
    """
    found = capture.values_the_lake_cannot_take(plan.source, plan.spec, plan.keys)
    if not found:
        return
    raise UsageError(
        f"{plan.spec.schema}.{plan.spec.name} holds values the lake cannot take: "
        f"{'; '.join(found)}. Update those rows to values the lake can take (or NULL) and run "
        "the same command again; no capture object was created (docs/operations.md, 'A change "
        "the lake cannot take')"
    )


def _undo_failed_enable(plan: _EnablePlan) -> str:
    """Undo an enable that failed (not one killed: a re-run resumes that): drop the capture
    objects and delta table this installation made for it and forget the enabling, so that
    nothing captured by this attempt is ever shipped and a re-run starts afresh.

    Each step is idempotent; a kill halfway leaves the ``enabling`` state, which a re-run
    resumes (re-creating what is missing) as after any killed enable.

    Returns:
        What happened, to end the error's line.
    """
    key = plan.state.table_key
    try:
        existing = capture.existing_objects(
            plan.source, plan.objects, plan.marker, plan.spec, recorded=True
        )
        ours = [found.item for found in existing if found.ownership is ownership.Ownership.OURS]
        capture.drop_source_objects(plan.source, ours)
        if storage.delta_version(plan.state.delta_path) is not None and _lake_table_is_ours(
            plan.state.delta_path, plan.marker
        ):
            storage.remove_table(plan.state.delta_path)
        _redo_copy_next_time(plan)
        state = plan.repo.incremental.get_state(key)
        if state is not None and state.status == ENABLING:
            plan.repo.incremental.delete_state(key)
            plan.repo.incremental.enablement_finished(state.enablement_id, disabled_at=now())
    except GluonError as exc:
        log.warning("undoing the failed enable of %s failed: %s", key, exc)
        return (
            f"undoing the enable failed too ({exc}): run the same command again to finish it, "
            "or --incremental-updates-disabled -x to drop what it made"
        )
    log.info("undid the failed enable of %s: dropped %s", key, _labels(ours) or "nothing")
    return (
        "the enable was undone (its capture objects were dropped, nothing it captured will "
        "ship): fix the cause and run the same command again"
    )


def _redo_copy_next_time(plan: _EnablePlan) -> None:
    """An enable with a table's first full offload copied it, then failed: record the offload
    as unfinished, so that running the same command again copies the table again.

    Its capture objects are gone, so changes made since the copy reach the lake only through
    a new copy (an enable of an offloaded table captures from then on, without copying).
    """
    offload = plan.offload
    if offload is None or offload.increment is not None or offload.replaces is not None:
        return  # a reset copies again anyway; an increment is offloaded on its own
    if plan.record is not None and plan.record.status == OFFLOADED:
        return  # offloaded before this command
    record = plan.repo.get_table(plan.state.table_key)
    if record is not None and record.status == OFFLOADED:
        plan.repo.save_table(replace(record, status=OFFLOADING))


def _slot_to_export(plan: _EnablePlan) -> capture.SourceObjectRef | None:
    """The replication slot to create with its snapshot for this command's initial offload
    (None: the method has no slot, or the table is offloaded already).

    A slot that exists here is one a run of this same command created and recorded before
    it died (planning refused any other): the snapshot it exported died with that run's
    connection and nothing was extracted from it (the table is not enabled yet), so it is
    dropped and created again with the offload that is about to run.
    """
    slot = next((item for item in plan.objects if item.kind in SNAPSHOT_KINDS), None)
    if slot is None or plan.offload is None:
        return None
    if capture.object_exists(plan.source, slot):
        log.info("re-creating %s: the offload that read its snapshot did not finish", slot.name)
        capture.drop_source_objects(plan.source, [slot])
    return slot


def _delta_table_role(state: IncrementalState) -> str:
    """What the table at ``state.delta_path`` is: IMMEDIATE mode stages each batch there."""
    return "staging table" if state.merge_mode == MergeMode.IMMEDIATE else "delta table"


def _enable_interrupted(repo: Repository, state: IncrementalState, method: str) -> bool:
    """An enable of ``method`` died after saving the enabled state and before dating its
    enablement (its last step): a re-run of the same command finishes it rather than
    refusing a table it left half recorded."""
    if state.status != ENABLED or state.method != method or state.enablement_id is None:
        return False
    for enablement in repo.incremental.enablements(state.table_key):
        if enablement["id"] == state.enablement_id:
            return enablement["enabled_at"] is None
    return False


# -- repairing ------------------------------------------------------------------------------


def _before_markers(repo: Repository, state: IncrementalState) -> bool:
    """The table was enabled before this installation marked what it creates (an upgrade)."""
    enabled_at = state.enabled_at
    return enabled_at is not None and enabled_at < repo.installation_created_at


def _missing_objects(
    source: SourceDialect, objects: list[capture.SourceObjectRef]
) -> list[capture.SourceObjectRef]:
    """``objects`` that do not exist, and schemas they need that do not exist (first)."""
    missing = [item for item in objects if not capture.object_exists(source, item)]
    if source.has_schemas:
        recorded = {item.schema for item in objects if item.kind is SourceObject.HYBRID_SCHEMA}
        needed = dict.fromkeys(item.schema for item in missing if item.schema not in recorded)
        for schema in needed:
            candidate = capture.SourceObjectRef(
                SourceObject.HYBRID_SCHEMA, schema, schema, "SCHEMA"
            )
            if not capture.object_exists(source, candidate):
                missing.insert(0, candidate)
    return missing


def _labels(objects: list[capture.SourceObjectRef]) -> str:
    return ", ".join(f"{item.object_type.lower()} {item.display_name}" for item in objects)


def _already_enabled(settings: Settings, state: IncrementalState) -> str:
    """The refusal of a second enable: says what is missing when capture objects are gone."""
    message = f"incremental update is already enabled for {state.table_key} ({state.method})"
    objects = capture_objects(state)
    if state.status != ENABLED or not objects or not settings.source_url:
        return message
    try:
        missing = _missing_objects(
            sources.connect(settings.source_url, settings.source_timeouts), objects
        )
    except GluonError:
        return message  # the refusal stands; the source's trouble shows in the next command
    if not missing:
        return message
    return (
        f"{message}, but {_labels(missing)} are missing (dropped outside gluon): add "
        "--incremental-recreate-capture-objects to re-create them"
    )


def repair_capture_objects(settings: Settings, options: EnableOptions) -> IncrementalResult:
    """Re-create the missing capture objects of an enabled table; refresh the code objects.

    The way out when capture objects were dropped (or a trigger disabled) outside
    gluon: application DML works and is captured again. Objects that exist must
    be this installation's. The changelog is created with the recorded columns.
    Changes made while capture was broken were never recorded: the message says so.

    Raises:
        StateError: not enabled, another method, or an existing object gluon does not own.
    """
    ref = options.table
    repo = Repository(settings.repo_url)
    record, state = repo.enabled_table(
        ref.key, otherwise="--incremental-recreate-capture-objects repairs an enabled table"
    )
    method = get_method(options.method)
    if method.name != state.method:
        raise StateError(
            f"{ref.key} uses extraction method {state.method}, not {method.name}: repeat it "
            "with --incremental-extraction-method"
        )
    source = sources.connect_configured(settings)
    source.check_connection()
    spec = record.spec()
    objects = capture_objects(state)
    marker = ownership.Marker(repo.installation_id, ref.key)
    _check_existing_objects(
        source,
        spec,
        objects,
        marker,
        take_over=False,
        legacy=_before_markers(repo, state),
        recorded=True,
    )
    missing = _missing_objects(source, objects)
    recreated = [item for item in missing if item.kind is not SourceObject.HYBRID_SCHEMA]
    steps = [
        Step("create_capture", f"create {o.object_type.lower()} {o.display_name}") for o in missing
    ] + [
        Step("refresh_capture", f"replace {o.object_type.lower()} {o.display_name}")
        for o in objects
        if o not in missing and o.kind in capture.REPLACED_ON_CREATE
    ]
    result = IncrementalResult(ref.key, steps, options.execute)
    if not options.execute:
        return result
    with lifecycle_lock(
        settings, ref.key, "offload --incremental-recreate-capture-objects", repo=repo
    ):
        schemas = [item for item in missing if item.kind is SourceObject.HYBRID_SCHEMA]
        capture.create_source_objects(
            source, spec, method, schemas + objects, state.key_columns, marker
        )
    result.message = (
        f"re-created {_labels(recreated)} for {ref.key}; changes made while they were missing "
        "were not captured: disable incremental update, re-offload with --reset-backend-table "
        "and enable it again to bring the lake back in step"
        if recreated
        else f"capture objects of {ref.key} refreshed (none was missing)"
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


def disable_incremental(
    settings: Settings, ref: TableRef, *, execute: bool, take_over_objects: bool = False
) -> IncrementalResult:
    """Disable incremental update when nothing is outstanding; drop what enabling created.

    Executing holds the table's lifecycle lock and checks what is outstanding under it.

    Only objects this installation marked for ``ref`` are dropped (with
    ``take_over_objects`` also gluon-shaped leftovers of another installation or of
    a gluon without markers); anything else is left in place and named in the
    message. Objects already gone (dropped behind gluon's back) are named too, and
    do not stop the disable.

    Raises:
        StateError: not enabled, or changes are outstanding (the message says what to run).
        LockHeldError: another command on the table is running (exit code 3).
    """
    repo = Repository(settings.repo_url)
    if not execute:
        return _disable_incremental(
            settings, repo, ref, execute=False, take_over_objects=take_over_objects
        )
    with lifecycle_lock(settings, ref.key, "offload --incremental-updates-disabled", repo=repo):
        return _disable_incremental(
            settings, repo, ref, execute=True, take_over_objects=take_over_objects
        )


def _disable_incremental(
    settings: Settings,
    repo: Repository,
    ref: TableRef,
    *,
    execute: bool,
    take_over_objects: bool,
) -> IncrementalResult:
    repo.require_known(ref.key)
    state = repo.incremental.get_state(ref.key)
    record = repo.get_table(ref.key)
    if state is None or record is None:
        raise StateError(f"incremental update is not enabled for {ref.key}: nothing to disable")
    source = sources.connect_configured(settings)
    source.check_connection()
    objects = capture_objects(state)
    mine = ownership.Marker(repo.installation_id, ref.key)
    existing = capture.existing_objects(
        source,
        objects,
        mine,
        record.spec(),
        unmarked_are_ours=_before_markers(repo, state),
        recorded=True,
    )
    droppable = [found.item for found in existing if _droppable(found, take_over_objects)]
    kept = [found for found in existing if found.item not in droppable]
    missing = [item for item in objects if item not in {found.item for found in existing}]
    refuse_unfinished_compaction(repo, ref, state)
    if state.status == ENABLED:
        feed = FEEDS[get_method(state.method).change_reader](source, record, state, repo)
        pending = feed.lost_on_drop(droppable)
        if pending:
            raise StateError(
                f"{ref.key} has {pending} changes in {feed.waits_in}: run "
                "--incremental-run-extraction "
                "and --incremental-run-compaction first, or drop them with "
                "--incremental-discard-changes -x"
            )
        # IMMEDIATE: the staging table keeps the last batch, merged already (an unmerged
        # one still has its rows in the changelog, refused above).
        in_lake = state.merge_mode != MergeMode.IMMEDIATE and storage.delta_row_count(
            state.delta_path, column=PARTITION_COLUMN, at_least=state.view_min_partition
        )
        if in_lake:
            raise StateError(
                f"{ref.key} has {in_lake} changes in delta table {state.delta_table}: run "
                "--incremental-run-compaction first, or drop them with "
                "--incremental-discard-changes -x"
            )
    steps = [
        Step("drop_capture", f"drop {o.object_type.lower()} {o.display_name} from the source")
        for o in reversed(droppable)
    ]
    steps += [Step("keep_capture", f"keep {found.label}: {_why_kept(found)}") for found in kept]
    steps += [
        Step("missing_capture", f"{o.object_type.lower()} {o.display_name} is already gone")
        for o in missing
    ]
    steps += [
        Step(
            "drop_delta_table",
            f"drop {_delta_table_role(state)} {state.delta_table} ({state.delta_path})",
        ),
        Step("record_disabled", f"make {record.user_view} read {record.base_table} directly"),
    ]
    result = IncrementalResult(ref.key, steps, execute)
    if not execute:
        return result
    repo.incremental.save_state(state.with_changes(status=DISABLING))
    with timed_step("drop_capture"):
        capture.drop_source_objects(source, droppable)
    with timed_step("drop_delta_table"):
        if _lake_table_is_ours(state.delta_path, mine):
            storage.remove_table(state.delta_path)
    with timed_step("record_disabled"):
        repo.incremental.delete_state(ref.key)
        repo.incremental.enablement_finished(state.enablement_id, disabled_at=now())
    notes = [f"kept {found.label} ({_why_kept(found)})" for found in kept]
    if missing:
        gone = ", ".join(f"{o.object_type.lower()} {o.display_name}" for o in missing)
        notes.append(f"already gone: {gone}")
    result.message = (
        f"incremental update disabled for {ref.key}; {record.user_view} reads the base table"
        + "".join(f"; {note}" for note in notes)
    )
    return result


def _droppable(found: capture.ExistingObject, take_over: bool) -> bool:
    if found.item.kind is SourceObject.HYBRID_SCHEMA:
        return found.ownership is ownership.Ownership.OURS
    return found.adoptable(take_over)


def _why_kept(found: capture.ExistingObject) -> str:
    whose = ownership.describe(found.ownership, found.marker)
    if found.item.kind is SourceObject.HYBRID_SCHEMA:
        return f"a schema gluon did not create here is never dropped ({whose})"
    if not found.shaped:
        return f"not shaped like gluon's ({whose}); gluon never drops it"
    return f"{whose}; drop it yourself, or add {ownership.TAKE_OVER_OPTION} if it is a leftover"


def _lake_table_is_ours(location: str, mine: ownership.Marker) -> bool:
    """Unmarked delta tables predate markers: the repository recorded them, so they are ours."""
    found = ownership.lake_table_marker(location)
    return found is None or ownership.classify(found, mine) is ownership.Ownership.OURS


def initial_offload_needed(settings: Settings, ref: TableRef, reset_backend_table: bool) -> bool:
    """Whether enabling ``ref`` offloads it first (it is not offloaded, or is to be reset)."""
    record = Repository(settings.repo_url, create=True).get_table(ref.key)
    return reset_backend_table or record is None or record.status != OFFLOADED


def check_capture_object_flags(
    *, enabling: bool, disabling: bool, take_over_objects: bool, recreate_capture_objects: bool
) -> None:
    """Refuse the capture-object flags without the action they belong to.

    Raises:
        UsageError: ``--incremental-take-over-objects`` without enabling or disabling, or
            ``--incremental-recreate-capture-objects`` without enabling.
    """
    if take_over_objects and not (enabling or disabling):
        raise UsageError(
            "--incremental-take-over-objects goes with --incremental-updates-enabled or "
            "--incremental-updates-disabled"
        )
    if recreate_capture_objects and not enabling:
        raise UsageError(
            "--incremental-recreate-capture-objects goes with --incremental-updates-enabled"
        )
