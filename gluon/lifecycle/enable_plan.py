"""Planning and checking an enable of incremental update, before anything is created.

Why one module past 400 lines: every check an enable makes before its first write, in the
order it makes them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gluon import source as sources
from gluon.capture import objects as source_objects
from gluon.capture import ownership
from gluon.config import Settings
from gluon.errors import StateError, UnsupportedError, UsageError
from gluon.extract.feeds import FEEDS, capture_objects, object_records
from gluon.lifecycle.checks import (
    already_enabled,
    check_delta_table,
    check_existing_objects,
    enable_interrupted,
    resumes_enable,
)
from gluon.lifecycle.result import IncrementalResult
from gluon.methods import get_method, registered_methods
from gluon.methods.base import SNAPSHOT_KINDS, ExtractionMethod, SourceObject, ViewKind
from gluon.naming import TableRef, lake_names
from gluon.offload.copy import (
    OFFLOADED,
    OffloadContext,
    OffloadOptions,
    validate_offload,
)
from gluon.offload.increments import OffloadType
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import (
    ENABLING,
    IncrementalState,
)
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect
from gluon.states import MergeMode, SlotScope

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
    slot_scope: SlotScope | None = None
    """``--incremental-pg-logical-slot``: the feed places the table's capture objects (None:
    not given, the feed chooses; PG_LOGICAL: the shared slot when the table can be a member)."""


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
class EnablePlan:
    settings: Settings
    repo: Repository
    source: SourceDialect
    spec: TableSpec
    method: type[ExtractionMethod]
    keys: tuple[str, ...]
    objects: list[source_objects.SourceObjectRef]
    state: IncrementalState
    offload: OffloadContext | None
    record: OffloadedTable | None
    resume: bool
    marker: ownership.Marker
    taken_over: list[source_objects.SourceObjectRef]
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
        objects = source_objects.named_source_objects(
            source, ref, method, changelog_table=changelog_table
        )
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
    objects: list[source_objects.SourceObjectRef],
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


def plan_enable(
    settings: Settings,
    options: EnableOptions,
    offload: OffloadOptions | None,
    repo: Repository | None = None,
) -> EnablePlan:
    method = get_method(options.method)
    ref = options.table
    offload_context = (
        validate_offload(
            settings,
            offload,
            repo,
            resumes_enable=offload.reset_backend_table
            and resumes_enable(settings, ref.key, method.name, repo),
        )
        if offload
        else None
    )
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
        existing.status == ENABLING or enable_interrupted(repo, existing, method.name)
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
            raise StateError(already_enabled(settings, existing, repo.installation_id))
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
        else FEEDS[method.change_reader].placed(
            source,
            repo,
            source_objects.plan_source_objects(
                source, ref, method, changelog_table=options.changelog_table
            ),
            spec,
            options.slot_scope,
        )
    )
    FEEDS[method.change_reader].check_placed(source, spec, objects)
    _preflight(source, spec, method, objects)
    marker = ownership.Marker(repo.installation_id, ref.key)
    taken_over = check_existing_objects(
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
    check_delta_table(state.delta_path, marker, options.take_over_objects, resume=resume)
    return EnablePlan(
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


def slot_to_export(plan: EnablePlan) -> source_objects.SourceObjectRef | None:
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
    if source_objects.object_exists(plan.source, slot):
        log.info("re-creating %s: the offload that read its snapshot did not finish", slot.name)
        source_objects.drop_source_objects(plan.source, [slot])
    return slot
