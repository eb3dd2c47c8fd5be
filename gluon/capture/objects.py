"""Phase 1, capture: planning, creating and dropping the source objects that record changes."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from gluon.capture.ownership import (
    Marker,
)
from gluon.errors import SourceError, UnsupportedError, UsageError
from gluon.faults import fault_point
from gluon.methods.base import (
    CREATION_ORDER,
    DML,
    JOINED_KINDS,
    OBJECT_TYPES,
    SNAPSHOT_KINDS,
    ExtractionMethod,
    SourceObject,
    ViewKind,
)
from gluon.naming import TableRef, database_slot_name, shorten, source_object_names
from gluon.schema import TableSpec
from gluon.source import dialect_class
from gluon.source.base import SourceDialect

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

REPLACED_ON_CREATE: frozenset[SourceObject] = frozenset(
    {SourceObject.CHANGELOG_TRIGGER, SourceObject.UPDATABLE_VIEW, SourceObject.UPDATABLE_TRIGGER}
)
"""Code objects: their create scripts replace them, so every create refreshes them.
The others hold state (the changelog's rows, the sequence's position) and are
created only when missing."""

ROW_EVENTS: tuple[DML, ...] = (DML.INSERT, DML.UPDATE, DML.DELETE)
"""The operations a row trigger sees (a MERGE reaches it as inserts and updates)."""

CHANGE_COLUMNS: tuple[str, ...] = ("gl_seq", "gl_op", "gl_origin", "gl_changed_at")
"""Changelog columns ahead of the table's own; a table column may not reuse these names."""


@cache
def change_fields() -> tuple[pa.Field, ...]:
    """What :func:`read_changes` adds after the table's columns."""
    import pyarrow as pa  # at first use: a no-op extraction reads no rows

    return (pa.field("gl_seq", pa.int64()), pa.field("gl_op", pa.string()))


CHANGELOG_SHAPE: frozenset[str] = frozenset({"gl_seq", "gl_op", "gl_origin"})
"""Columns every gluon changelog has: a table without them is never dropped as one."""

NO_INSTALLATION = Marker("0" * 32, "")
"""The marker objects get when created outside an installation (tests, tooling)."""


@dataclass(frozen=True, slots=True)
class SourceObjectRef:
    """One object incremental update creates in the source database."""

    kind: SourceObject
    schema: str
    name: str
    object_type: str
    """``TABLE``, ``SEQUENCE``, ``TRIGGER``, ``VIEW`` or ``SCHEMA``."""

    @property
    def display_name(self) -> str:
        """``SCHEMA.NAME``, or the bare name of what is in no schema (a schema, a replication
        slot: a slot belongs to the database)."""
        if self.object_type in ("SCHEMA", "SLOT"):
            return self.name
        return f"{self.schema}.{self.name}"


def creation_rank(item: SourceObjectRef) -> int:
    return CREATION_ORDER.index(item.kind)


def find_object(objects: Sequence[SourceObjectRef], kind: SourceObject) -> SourceObjectRef | None:
    return next((item for item in objects if item.kind is kind), None)


def object_exists(
    source: SourceDialect, item: SourceObjectRef, installation: str | None = None
) -> bool:
    """``item`` exists in the source (with its object type).

    ``installation`` (a repository's id): a table's place in a shared slot is looked up in
    that installation's publication only; another installation's shared slot holding the
    same table is no object of this one (each has its own slot and publication). Without
    it, any gluon shared slot's publication counts.

    Raises:
        SourceError: the catalog cannot be read.
    """
    params = {
        "object_type": item.object_type,
        "schema": item.schema,
        "name": item.name,
        "publication": None if installation is None else _shared_publication(source, installation),
    }
    return bool(source.run_query("object_exists", params, schema=item.schema))


def _shared_publication(source: SourceDialect, installation: str) -> str:
    """The publication of ``installation``'s shared slot in ``source``'s database (named as
    ``gluon.source.publication.DatabaseSlot.of`` names it)."""
    return database_slot_name(str(source.engine.url.database or "postgres"), installation)


def named_source_objects(
    source: SourceDialect,
    ref: TableRef,
    method: type[ExtractionMethod],
    *,
    changelog_table: str | None = None,
) -> list[SourceObjectRef]:
    """The objects ``method`` declares for ``ref``, named for ``source``, in creation order.

    Kinds the dialect provides implicitly are left out; no database access (so
    no hybrid schema: see :func:`plan_source_objects`).
    """
    names = source_object_names(
        ref,
        max_length=source.identifier_length,
        has_schemas=source.has_schemas,
        fold=source.name_case,
        changelog_table=changelog_table,
        database=source.engine.url.database,
        in_bytes=source.identifier_length_in_bytes,
    )
    return [
        SourceObjectRef(kind, name.schema, name.name, OBJECT_TYPES[kind])
        for kind in CREATION_ORDER
        if method.has_object(kind) and kind not in source.implicit_source_objects
        for name in [getattr(names, kind.value)]
    ]


def plan_source_objects(
    source: SourceDialect,
    ref: TableRef,
    method: type[ExtractionMethod],
    *,
    changelog_table: str | None = None,
) -> list[SourceObjectRef]:
    """The objects ``method`` needs in ``source`` for ``ref``, in creation order.

    Names fit the connected server's identifier limit (read first). Only the kinds the
    method declares, less those the dialect provides implicitly; a schema the objects go
    to that does not exist yet comes first, so it is created (and dropped again on
    disable).

    Args:
        source: the source dialect (queried only to see which schemas exist).
        ref: the application table.
        method: the extraction method.
        changelog_table: the ``--incremental-changelog-table`` override.

    Raises:
        SourceError: the source database cannot be queried.
    """
    source.read_server_limits()  # e.g. 30-byte names on Oracle with COMPATIBLE below 12.2
    planned = named_source_objects(source, ref, method, changelog_table=changelog_table)
    schemas: list[SourceObjectRef] = []
    if source.has_schemas:
        for schema in dict.fromkeys(item.schema for item in planned):
            candidate = SourceObjectRef(SourceObject.HYBRID_SCHEMA, schema, schema, "SCHEMA")
            if not object_exists(source, candidate):
                schemas.append(candidate)
    return schemas + planned


def _key_names(spec: TableSpec, key_columns: Sequence[str]) -> list[str]:
    if not key_columns:
        raise UsageError(
            f"{spec.schema}.{spec.name} has no primary key: name its key with "
            "--incremental-key-columns"
        )
    try:
        return [spec.column(name).name for name in key_columns]
    except KeyError as exc:
        raise UsageError(
            f"--incremental-key-columns names {exc.args[0]!r}, which {spec.schema}.{spec.name} "
            "does not have"
        ) from None


def _refuse_reserved_columns(spec: TableSpec) -> None:
    clashes = [column.name for column in spec.columns if column.lake_name in CHANGE_COLUMNS]
    if clashes:
        raise UnsupportedError(
            f"{spec.schema}.{spec.name} has columns named like gluon's changelog columns "
            f"({', '.join(clashes)}); rename them to enable incremental update"
        )


def script_context(
    source: SourceDialect,
    spec: TableSpec,
    method: type[ExtractionMethod],
    objects: Sequence[SourceObjectRef],
    key_columns: Sequence[str],
    marker: Marker | None = None,
) -> dict[str, Any]:
    """What the ``create_<kind>`` scripts render with (besides ``object``).

    ``marker`` (default :data:`NO_INSTALLATION`) is the ownership mark each
    object gets, as ``marker_literal`` (a SQL string) and ``marker_comment``.

    ``staging`` is None for a table enabled before gluon staged lake rows: its
    view then shows the application table alone, as it did.

    Raises:
        UsageError: no key columns, or a key column the table lacks.
    """
    staging = find_object(objects, SourceObject.LAKE_ROWS_TABLE)
    trigger = find_object(objects, SourceObject.CHANGELOG_TRIGGER)
    return {
        "table": spec,
        "columns": list(spec.columns),
        "keys": _key_names(spec, key_columns),
        "events": [event.value for event in ROW_EVENTS if event in method.captured_dml],
        "uncaptured_events": [
            event.value for event in ROW_EVENTS if event in method.uncaptured_dml_reported()
        ],
        "log": find_object(objects, SourceObject.CHANGELOG_TABLE),
        "sequence": find_object(objects, SourceObject.CHANGELOG_SEQUENCE),
        "view": find_object(objects, SourceObject.UPDATABLE_VIEW),
        "staging": staging,
        "staging_index": _index_name(source, staging) if staging else None,
        "truncate_trigger": truncate_trigger_name(source, trigger) if trigger else None,
        "statement_trigger_names": statement_trigger_names(source, trigger) if trigger else {},
        "unique_inserts": method.view_kind is ViewKind.UNION_ALL,
        "log_types": {
            column.name: changelog_type(
                type(source), column.source_type, extended_strings=source.extended_strings
            )
            for column in spec.columns
        },
        "marker_literal": (marker or NO_INSTALLATION).sql_literal,
        "marker_comment": (marker or NO_INSTALLATION).sql_comment,
    }


def changelog_type(
    dialect: str | type[SourceDialect], source_type: str, *, extended_strings: bool = False
) -> str:
    """The changelog column type recording a source column of ``source_type`` (the dialect's
    ``wide_types``; ``extended_strings``: the server allows longer strings, its
    ``extended_wide_types`` first)."""
    declared = source_type.strip()
    cls = dialect_class(dialect) if isinstance(dialect, str) else dialect
    rules = (*(cls.extended_wide_types if extended_strings else ()), *cls.wide_types)
    for pattern, wide in rules:
        if pattern.match(declared):
            return wide
    return declared


def created_names(
    source: SourceDialect | type[SourceDialect],
    method: type[ExtractionMethod],
    item: SourceObjectRef,
    statement_level: bool = False,
) -> tuple[str, ...]:
    """The names of the database objects ``item`` stands for, as the create scripts make
    them: a recorded trigger may be several triggers (one per row event where the dialect
    has ``trigger_per_event``; a changelog trigger captured at ``statement_level``
    (``gluon.capture.statement_level.captures_by_statement``) has its INSERT and DELETE
    statement triggers beside it; beside a changelog trigger, the TRUNCATE statement trigger
    where the dialect ``captures_truncate``). Other objects are themselves."""
    if item.kind not in (SourceObject.CHANGELOG_TRIGGER, SourceObject.UPDATABLE_TRIGGER):
        return (item.name,)
    names = [item.name]
    if statement_level and item.kind is SourceObject.CHANGELOG_TRIGGER:
        names += statement_trigger_names(source, item).values()
    if source.trigger_per_event:
        # The updatable view's trigger covers every event (an uncaptured one is refused).
        events = (
            ROW_EVENTS
            if item.kind is SourceObject.UPDATABLE_TRIGGER
            else [
                event
                for event in ROW_EVENTS
                if event in method.captured_dml or event in method.uncaptured_dml_reported()
            ]
        )
        names = [f"{item.name}_{event.value.lower()}" for event in events]
    if item.kind is SourceObject.CHANGELOG_TRIGGER and source.captures_truncate:
        names.append(truncate_trigger_name(source, item))
    return tuple(names)


def truncate_trigger_name(
    source: SourceDialect | type[SourceDialect], trigger: SourceObjectRef
) -> str:
    """The name of the statement trigger recording a TRUNCATE, next to the row trigger
    ``trigger`` and calling the same function (where the dialect has one: PostgreSQL; a
    trigger is either row- or statement-level). Dropping the function drops both."""
    return shorten(f"{trigger.name}_truncate", source.max_identifier_length)


def statement_trigger_names(
    source: SourceDialect | type[SourceDialect], trigger: SourceObjectRef
) -> dict[str, str]:
    """The names of the INSERT and DELETE statement triggers beside ``trigger`` where the
    dialect's create script captures at statement level (PostgreSQL, on tables that take
    transition tables: one trigger per event, the UPDATE one named ``trigger``). They call
    the same function: dropping it drops them all."""
    return {
        event: shorten(f"{trigger.name}_{event.lower()}", source.max_identifier_length)
        for event in ("INSERT", "DELETE")
    }


def _index_name(source: SourceDialect, table: SourceObjectRef) -> str:
    """The name of the key index of ``table`` (same schema), within the dialect's limit."""
    name = shorten(
        f"{table.name}_ix", source.identifier_length, in_bytes=source.identifier_length_in_bytes
    )
    return name.upper() if source.name_case == "upper" else name.lower()


def create_source_objects(
    source: SourceDialect,
    spec: TableSpec,
    method: type[ExtractionMethod],
    objects: list[SourceObjectRef],
    key_columns: tuple[str, ...],
    marker: Marker | None = None,
) -> None:
    """Create ``objects`` (from :func:`plan_source_objects`) for ``spec``, marked with ``marker``.

    Idempotent: each object is one script run in one transaction; a re-run
    creates the stateful objects still missing and replaces the code objects
    (triggers, view), so a run that died halfway is completed.

    Args:
        source: the source dialect.
        spec: the application table.
        method: the extraction method (its captured operations pick the trigger events).
        objects: the objects to create, usually the whole plan.
        key_columns: the primary key or the ``--incremental-key-columns``.

    Raises:
        UsageError: no key columns, or a key column the table lacks.
        UnsupportedError: a table column clashes with a changelog column.
        SourceError: the source refused a statement.
    """
    objects = [item for item in objects if item.kind not in JOINED_KINDS]  # the feed joins
    if not objects:
        return
    _refuse_reserved_columns(spec)
    source.read_server_limits()  # a resumed enable or a repair did not plan: same types, names
    context = script_context(source, spec, method, objects, key_columns, marker)
    for item in sorted(objects, key=creation_rank):
        if item.kind not in REPLACED_ON_CREATE and object_exists(source, item):
            continue
        log.info("creating %s %s", item.object_type.lower(), item.display_name)
        fault_point("capture.before_create_object")
        if item.kind in REPLACED_ON_CREATE:
            _create_code_object(source, item, context)
        else:
            source.execute_script(f"create_{item.kind.value}", object=item, **context)
        fault_point("capture.after_create_object")


def _create_code_object(source: SourceDialect, item: SourceObjectRef, context: Any) -> None:
    """Create a trigger or view and check it compiled; one that did not is dropped at once.

    Oracle creates a trigger that does not compile INVALID and ENABLED (a warning, not an
    error), and every application DML on its table then fails with ORA-04098.

    Raises:
        SourceError: the object was refused or did not compile (then it is gone).
    """
    try:
        source.execute_script(f"create_{item.kind.value}", object=item, **context)
    except SourceError as refused:
        problem = source.compile_problem(item.schema, item.name, item.object_type)
        if problem is None:
            raise
        _drop_invalid(source, item, problem, refused)
    problem = source.compile_problem(item.schema, item.name, item.object_type)
    if problem is not None:
        _drop_invalid(source, item, problem, None)


def _drop_invalid(
    source: SourceDialect, item: SourceObjectRef, problem: str, cause: Exception | None
) -> None:
    source.execute_script(f"drop_{item.kind.value}", object=item)
    raise SourceError(
        f"{item.object_type.lower()} {item.display_name} did not compile and was dropped "
        f"(application DML on the table keeps working): {problem}; check the grants of "
        f"{item.schema} on the objects it names (see docs/operations.md, Oracle prerequisites)"
    ) from cause


def drop_source_objects(source: SourceDialect, objects: list[SourceObjectRef]) -> None:
    """Drop ``objects`` that exist, in reverse creation order.

    A hybrid schema is dropped only once it is empty: other tables' objects may
    live there too.

    Raises:
        SourceError: the source refused a statement.
    """
    for item in sorted(objects, key=creation_rank, reverse=True):
        if item.kind in JOINED_KINDS or not object_exists(source, item):
            continue  # a table's place in a shared object: its feed leaves it
        if item.kind is SourceObject.HYBRID_SCHEMA:
            rows = source.run_query("count_schema_objects", {"schema": item.schema})
            if rows and int(rows[0][0]):
                log.info("keeping schema %s: it still holds other objects", item.schema)
                continue
        log.info("dropping %s %s", item.object_type.lower(), item.display_name)
        fault_point("capture.before_drop_object")
        source.execute_script(f"drop_{item.kind.value}", object=item)
        fault_point("capture.after_drop_object")


@contextmanager
def slot_exporting_snapshot(source: SourceDialect, slot: SourceObjectRef) -> Iterator[None]:
    """Create replication slot ``slot``; the source's reads inside see its exported snapshot.

    The initial offload of an enable whose method has a slot (``SNAPSHOT_KINDS``) runs
    inside: it copies exactly the transactions committed before the slot's consistent
    point, the slot streams exactly the others, so no change is missed or shipped twice
    across the boundary.

    Raises:
        UnsupportedError: the source cannot export a slot's snapshot.
        SourceError: the slot could not be created.
    """
    if slot.kind not in SNAPSHOT_KINDS:
        raise UnsupportedError(f"{slot.object_type.lower()} {slot.name} exports no snapshot")
    log.info("creating %s %s with its snapshot", slot.object_type.lower(), slot.display_name)
    fault_point("capture.before_create_object")
    with source.slot_with_snapshot(slot.name):
        fault_point("capture.after_create_object")
        yield
