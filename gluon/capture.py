"""Phase 1, capture: the source objects that record changes, and reading them back.

Dialect-free: every SQL text comes from the dialect's templates
(``templates/<dialect>/create_<kind>.sql.j2``, ``drop_<kind>.sql.j2``,
``object_exists``, ``count_schema_objects``, ``count_changes``,
``read_changes``, ``delete_changes``); names come from ``gluon.naming``.

The changelog holds ``gl_seq`` (its key, drawn from the changelog sequence;
SQLite: AUTOINCREMENT), ``gl_op`` (``I``/``U``/``D``/``T``), ``gl_origin`` (``T``:
the changelog trigger on the application table, ``V``: the updatable view's
trigger), ``gl_changed_at``, then every table column with its declared type,
all nullable. The triggers fire once per row:

- INSERT: ``I`` with the new row;
- UPDATE that changes no column: nothing;
- UPDATE that keeps the key: ``U`` with the new row;
- UPDATE that changes the key: ``D`` with the old key, then ``I`` with the new row;
- DELETE: ``D`` with the old key (other columns NULL);
- TRUNCATE (PostgreSQL: a statement trigger calling the same function, named by
  :func:`truncate_trigger_name`, on every method): one ``T`` row, every table
  column NULL: every row of the table before it is gone.

A key-changing update whose old key another row of the same statement took
(``UPDATE t SET id = id + 1`` under a key checked at statement end) records no
``D``: PostgreSQL fires the row triggers at the end of the statement and
writes the ``D`` only when no row holds the old key; Oracle's compound
trigger does the same at AFTER STATEMENT; SQLite's row triggers, which fire as
each row changes, make the same check (a row holding the old key then moved
into it earlier in the statement).

A method that does not capture an operation has no changelog trigger for it,
unless it reports uncaptured DML (CHANGELOG_INSERT): then an update records a
``U`` row and a delete a ``D`` row holding the old key only, which extraction
reports and never ships (``gluon.insert_only``). The updatable view refuses
an operation it does not capture (so it can never fall through to the
application table).

The UPDATABLE family also has a lake-rows table (``<TABLE>_LK``, next to the
view): lake rows staged by ``gluon.patching``. The updatable view shows the
application table's rows, then the staged rows whose key the application
table does not have. Its INSTEAD OF trigger records every change the same
way whichever row it touches, and keeps the staged copy in step: a change to
a staged row (or an insert of a key the application table lacks) is applied
to the lake-rows table too, so later patches see it; a change to an
application row touches nothing but the changelog. Under a union-all delta
view (``*_INSERT``) an insert of a key the view already shows is refused.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from gluon.errors import SourceError, UnsupportedError, UsageError
from gluon.faults import fault_point
from gluon.methods.base import (
    CREATION_ORDER,
    DML,
    OBJECT_TYPES,
    SNAPSHOT_KINDS,
    UNMARKED_KINDS,
    ExtractionMethod,
    SourceObject,
    ViewKind,
)
from gluon.naming import TableRef, shorten, source_object_names
from gluon.ownership import TAKE_OVER_OPTION, Marker, Ownership, classify, describe, parse_marker
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

ARRAY_DELETE_CHUNK = 100_000
"""Runs of sequence values per DELETE where the dialect binds arrays (see ``sequence_runs``)."""

RUNS_PER_DELETE = 250
"""Runs of sequence values per DELETE where each run is two bind parameters (SQLite, Oracle).

The runs are OR-ed ``BETWEEN`` terms, and SQLite parses an OR chain as an expression at most
1,000 levels deep (SQLITE_MAX_EXPR_DEPTH): 250 runs keep well under it, and 500 binds far
under either database's bind limit (SQLite 32,766, Oracle 65,535)."""


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


def _rank(item: SourceObjectRef) -> int:
    return CREATION_ORDER.index(item.kind)


def _find(objects: Sequence[SourceObjectRef], kind: SourceObject) -> SourceObjectRef | None:
    return next((item for item in objects if item.kind is kind), None)


def _exists(source: SourceDialect, item: SourceObjectRef) -> bool:
    params = {"object_type": item.object_type, "schema": item.schema, "name": item.name}
    return bool(source.run_query("object_exists", params, schema=item.schema))


def object_exists(source: SourceDialect, item: SourceObjectRef) -> bool:
    """``item`` exists in the source (with its object type).

    Raises:
        SourceError: the catalog cannot be read.
    """
    return _exists(source, item)


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
            if not _exists(source, candidate):
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
    staging = _find(objects, SourceObject.LAKE_ROWS_TABLE)
    trigger = _find(objects, SourceObject.CHANGELOG_TRIGGER)
    return {
        "table": spec,
        "columns": list(spec.columns),
        "keys": _key_names(spec, key_columns),
        "events": [event.value for event in ROW_EVENTS if event in method.captured_dml],
        "uncaptured_events": [
            event.value for event in ROW_EVENTS if event in method.uncaptured_dml_reported()
        ],
        "log": _find(objects, SourceObject.CHANGELOG_TABLE),
        "sequence": _find(objects, SourceObject.CHANGELOG_SEQUENCE),
        "view": _find(objects, SourceObject.UPDATABLE_VIEW),
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
) -> tuple[str, ...]:
    """The names of the database objects ``item`` stands for, as the create scripts make
    them: a recorded trigger may be several triggers (one per row event where the dialect
    has ``trigger_per_event``; beside a changelog trigger, the TRUNCATE statement trigger
    where the dialect ``captures_truncate``). Other objects are themselves."""
    if item.kind not in (SourceObject.CHANGELOG_TRIGGER, SourceObject.UPDATABLE_TRIGGER):
        return (item.name,)
    names = [item.name]
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
    if not objects:
        return
    _refuse_reserved_columns(spec)
    source.read_server_limits()  # a resumed enable or a repair did not plan: same types, names
    context = script_context(source, spec, method, objects, key_columns, marker)
    for item in sorted(objects, key=_rank):
        if item.kind not in REPLACED_ON_CREATE and _exists(source, item):
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
    for item in sorted(objects, key=_rank, reverse=True):
        if not _exists(source, item):
            continue
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


# -- ownership ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExistingObject:
    """A source object that exists, and whose it is."""

    item: SourceObjectRef
    ownership: Ownership
    marker: Marker | None
    shaped: bool
    """Shaped like what gluon creates (a changelog has gl_seq, gl_op, gl_origin; ...)."""

    @property
    def label(self) -> str:
        return f"{self.item.object_type.lower()} {self.item.display_name}"

    def adoptable(self, take_over: bool) -> bool:
        """Gluon may use it (ours), or take it over when asked (a leftover of gluon's)."""
        if self.ownership is Ownership.OURS:
            return self.shaped
        return (
            take_over
            and self.shaped
            and self.ownership in (Ownership.FOREIGN, Ownership.OTHER_INSTALLATION)
        )

    def refusal(self) -> str:
        """Why enabling cannot use it, and the way forward (one line)."""
        whose = describe(self.ownership, self.marker)
        if not self.shaped:
            return (
                f"{self.label} already exists and is not shaped like gluon's ({whose}); gluon "
                "never uses or drops it: pick another name (--incremental-changelog-table) "
                "or move it out of the way"
            )
        if self.ownership is Ownership.OTHER_TABLE:
            if self.item.kind is not SourceObject.CHANGELOG_TABLE and self.marker is not None:
                # Only the changelog can be renamed: another kind is a name the other table
                # got before gluon's names told tables apart (X_UV's trigger was X_UV).
                return (
                    f"{self.label} already exists: {whose}; disable incremental update on "
                    f"{self.marker.table_key} and enable it again (its objects get names of "
                    "their own), then enable this table"
                )
            return (
                f"{self.label} already exists: {whose}; pick another name with "
                "--incremental-changelog-table"
            )
        if self.ownership is Ownership.OTHER_INSTALLATION:
            return (
                f"{self.label} already exists: {whose}; disable incremental update there first, "
                f"or add {TAKE_OVER_OPTION} to drop and re-create it for this installation "
                "(changes waiting in it are discarded)"
            )
        return (
            f"{self.label} already exists and {whose}: drop it or pick another name; if a gluon "
            f"without ownership markers made it, add {TAKE_OVER_OPTION} to drop and re-create it"
        )


def _marker(source: SourceDialect, item: SourceObjectRef) -> Marker | None:
    params = {"object_type": item.object_type, "schema": item.schema, "name": item.name}
    for row in source.run_query("object_marker", params, schema=item.schema):
        found = parse_marker(row[0])
        if found is not None:
            return found
    return None


def _columns(source: SourceDialect, item: SourceObjectRef) -> set[str]:
    params = {"schema": item.schema, "name": item.name}
    return {str(row[0]).lower() for row in source.run_query("object_columns", params)}


def _shaped(source: SourceDialect, spec: TableSpec | None, item: SourceObjectRef) -> bool:
    if item.kind is SourceObject.CHANGELOG_TABLE:
        return _columns(source, item) >= CHANGELOG_SHAPE
    if item.kind is SourceObject.LAKE_ROWS_TABLE:
        columns = _columns(source, item)
        table = {column.name.lower() for column in spec.columns} if spec else columns
        return bool(columns) and columns <= table
    return True  # the object type already matched: a sequence, a view, a trigger, a schema


def existing_objects(
    source: SourceDialect,
    objects: Sequence[SourceObjectRef],
    mine: Marker,
    spec: TableSpec | None = None,
    *,
    unmarked_are_ours: bool = False,
    recorded: bool = False,
) -> list[ExistingObject]:
    """Those of ``objects`` that exist, in creation order, each with its owner and shape.

    A schema is shared by many tables: it is ours when this installation made it.
    Kinds the dialect cannot mark follow the changelog table they serve.
    ``unmarked_are_ours``: the objects were recorded by this installation before it
    marked what it creates, so an unmarked one of the right shape is ours.
    ``recorded``: this installation's repository records ``objects`` for the table, so
    the kinds that take no mark (a replication slot) are ours; otherwise they are foreign.

    Raises:
        SourceError: the catalog cannot be read.
    """
    found: list[ExistingObject] = []
    unmarkable = source.unmarkable_source_objects
    for item in sorted(objects, key=_rank):
        if not _exists(source, item) or item.kind in unmarkable:
            continue
        marker = _marker(source, item)
        per_table = item.kind is not SourceObject.HYBRID_SCHEMA
        ownership = classify(marker, mine, per_table=per_table)
        shaped = _shaped(source, spec, item)
        if ownership is Ownership.FOREIGN and shaped and unmarked_are_ours:
            ownership = Ownership.OURS
        if item.kind in UNMARKED_KINDS and marker is None and recorded:
            ownership = Ownership.OURS
        found.append(ExistingObject(item, ownership, marker, shaped))
    changelog = next((o for o in found if o.item.kind is SourceObject.CHANGELOG_TABLE), None)
    for item in objects:
        if item.kind in unmarkable and _exists(source, item):
            unmarked = Ownership.OURS if unmarked_are_ours else Ownership.FOREIGN
            judged = changelog or ExistingObject(item, unmarked, None, True)
            found.append(ExistingObject(item, judged.ownership, judged.marker, True))
    return sorted(found, key=lambda existing: _rank(existing.item))


def capture_problems(
    source: SourceDialect,
    table: TableSpec,
    objects: Sequence[SourceObjectRef],
    *,
    truncate: bool = True,
) -> list[str]:
    """What stops changes to ``table`` from being captured now: a capture trigger that is
    disabled or gone, a changelog that is gone (each one line, with the way out); with
    ``truncate``, also a TRUNCATE trigger that is disabled or gone (tables enabled before
    TRUNCATE was captured have none until their capture objects are re-created: status
    says so, while extraction, which passes False, does not fail every run for it).

    Changes the application made meanwhile were never recorded: only a new
    offload brings the lake back in step.

    Raises:
        SourceError: the catalog cannot be read.
    """
    problems: list[str] = []
    resync = (
        "then disable incremental update, re-offload with --reset-backend-table and enable it "
        "again (changes made meanwhile were not captured)"
    )
    recreate = (
        "re-create the capture objects (offload --incremental-updates-enabled "
        f"--incremental-recreate-capture-objects), {resync}"
    )
    changelog = _find(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is not None and not _exists(source, changelog):
        problems.append(
            f"changelog table {changelog.schema}.{changelog.name} of {table.schema}.{table.name} "
            "is missing: " + recreate
        )
    trigger = _find(objects, SourceObject.CHANGELOG_TRIGGER)
    if trigger is None:
        return problems
    truncate_name = truncate_trigger_name(source, trigger)
    params = {
        "schema": trigger.schema,
        "name": trigger.name,
        "truncate_name": truncate_name,
        "table_schema": table.schema,
        "table_name": table.name,
    }
    rows = source.run_query("capture_trigger_state", params, schema=trigger.schema)
    # One row per trigger: (name, fires[, compiles]); fires is NULL where the dialect reports
    # a missing trigger, compiles is there where a trigger can exist without compiling (Oracle).
    truncate_fires = [row[1] for row in rows if row[0] == truncate_name]
    row_triggers = [row for row in rows if row[0] != truncate_name]
    fires = [row[1] for row in row_triggers]
    compiles = [bool(row[2]) if len(row) > 2 else True for row in row_triggers]
    label = f"capture trigger {trigger.schema}.{trigger.name} on {table.schema}.{table.name}"
    if not fires or None in fires:
        problems.append(f"{label} is missing: {recreate}")
    elif not all(compiles):
        drop = " ".join(source.render("drop_changelog_trigger", object=trigger).split())
        problems.append(
            f"{label} is INVALID (it does not compile, so every insert, update and delete on "
            f"the table fails): drop it at once ({drop}), then {recreate}"
        )
    elif not all(fires):
        enable = " ".join(
            source.render("enable_capture_trigger", trigger=trigger, table=table).split()
        )
        problems.append(f"{label} is disabled: enable it ({enable}), {resync}")
    if truncate and truncate_fires and not all(truncate_fires):
        state = "missing" if None in truncate_fires else "disabled"
        problems.append(
            f"capture trigger {truncate_name} (for TRUNCATE) on {table.schema}.{table.name} is "
            f"{state}: a TRUNCATE of the table would not reach the lake: re-create the capture "
            "objects (offload --incremental-updates-enabled "
            "--incremental-recreate-capture-objects); if the table was truncated meanwhile, "
            + resync
        )
    return problems


def count_changes(source: SourceDialect, objects: list[SourceObjectRef]) -> int:
    """Rows waiting in the changelog (0 when the method keeps none).

    Raises:
        SourceError: the changelog cannot be read.
    """
    changelog = _find(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None:
        return 0
    rows = source.run_query("count_changes", schema=changelog.schema, table=changelog.name)
    return int(rows[0][0])


@dataclass(frozen=True, slots=True)
class OldestChange:
    """The oldest change waiting in a changelog, timed on the source's clock."""

    changed_at: dt.datetime
    """When it was captured (``gl_changed_at``, naive UTC, the source's clock)."""
    source_now: dt.datetime
    """The source's clock when it was read (naive UTC)."""
    read_at: dt.datetime
    """This host's clock when it was read (naive UTC)."""

    @property
    def age(self) -> dt.timedelta:
        """How long it has waited (never negative: both times come from one clock)."""
        return max(self.source_now - self.changed_at, dt.timedelta(0))

    @property
    def captured_at(self) -> dt.datetime:
        """Its capture time on this host's clock: the source's clock may differ from this
        host's, the age does not."""
        return self.read_at - self.age


def oldest_change(source: SourceDialect, objects: list[SourceObjectRef]) -> OldestChange | None:
    """The oldest change in the changelog, by ``gl_seq`` (None: nothing pending, or no changelog).

    Reads one row through the changelog's key: cheap however long the changelog is.

    Raises:
        SourceError: the changelog cannot be read.
    """
    changelog = _find(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None:
        return None
    rows = source.run_query("oldest_change", schema=changelog.schema, table=changelog.name)
    if not rows:
        return None
    return OldestChange(_utc(rows[0][0]), _utc(rows[0][1]), _utc(dt.datetime.now(dt.UTC)))


def _utc(value: dt.datetime | str) -> dt.datetime:
    """A naive UTC time from a driver's value (SQLite returns the text its default wrote)."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def sequence_position(source: SourceDialect, objects: list[SourceObjectRef]) -> int | None:
    """The last ``gl_seq`` the changelog's sequence handed out (None: no changelog).

    SQLite has no sequence object: AUTOINCREMENT keeps its position in
    ``sqlite_sequence`` under the changelog's name.

    Raises:
        SourceError: the sequence cannot be read.
    """
    changelog = _find(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None:
        return None
    sequence = _find(objects, SourceObject.CHANGELOG_SEQUENCE) or changelog
    rows = source.run_query(
        "sequence_position",
        {"schema": sequence.schema, "name": sequence.name},
        schema=sequence.schema,
        table=sequence.name,
    )
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def read_changes(
    source: SourceDialect,
    spec: TableSpec,
    objects: list[SourceObjectRef],
    *,
    limit: int | None,
    seqs: Sequence[int] = (),
) -> pa.Table:
    """The changelog rows visible now, lowest ``gl_seq`` first.

    Args:
        source: the source dialect.
        spec: the application table (the changelog has its columns).
        objects: the table's source objects.
        limit: at most this many rows (None: all of them).
        seqs: only the changes of these ``gl_seq`` values (empty: every change).

    Returns:
        The table's columns (lake names and types, ``spec`` order), then
        ``gl_seq`` (int64) and ``gl_op`` (``I``/``U``/``D``). A ``D`` row holds
        only the key columns.

    Raises:
        SourceError: the changelog cannot be read or holds a value that does not fit.
    """
    import pyarrow as pa

    schema = pa.schema([*spec.arrow_schema, *change_fields()])
    changelog = _find(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None:
        return schema.empty_table()
    sql = source.render(
        "read_changes",
        schema=changelog.schema,
        table=changelog.name,
        columns=source.select_list(spec),
        limit=limit,
        seqs=[int(seq) for seq in seqs],
    )
    params = {} if limit is None else {"limit": limit}
    batches = source.read_query_batches(
        spec,
        sa.text(sql),
        params,
        batch_rows=limit or source.fetch_rows,
        extra_fields=change_fields(),
    )
    return pa.Table.from_batches(list(batches), schema=schema)


@dataclass(frozen=True, slots=True)
class ChangeText:
    """One changelog row as the source prints it: every value as text (None: NULL)."""

    gl_seq: int
    gl_op: str
    values: dict[str, str | None]
    """By source column name."""


def read_change_texts(
    source: SourceDialect, spec: TableSpec, objects: list[SourceObjectRef], seqs: Sequence[int]
) -> dict[int, ChangeText]:
    """The changelog rows of ``seqs`` (those still there), every value printed by the source.

    Text needs no conversion, so this reads a change whose values the lake cannot take.

    Raises:
        SourceError: the changelog cannot be read.
    """
    changelog = _find(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None or not seqs:
        return {}
    names = [column.name for column in spec.columns]
    texts = [
        source.render("cast_to_text", column=name, source_type=column.source_type).strip()
        for name, column in zip(names, spec.columns, strict=True)
    ]
    rows = source.run_query(
        "read_changes",
        schema=changelog.schema,
        table=changelog.name,
        columns=texts,
        limit=None,
        seqs=[int(seq) for seq in seqs],
    )
    found: dict[int, ChangeText] = {}
    for row in rows:
        *values, seq, op = tuple(row)
        found[int(seq)] = ChangeText(
            int(seq),
            str(op),
            {
                name: None if value is None else str(value)
                for name, value in zip(names, values, strict=True)
            },
        )
    return found


def later_change_of_key(
    source: SourceDialect,
    spec: TableSpec,
    objects: list[SourceObjectRef],
    change: ChangeText,
    keys: Sequence[str],
) -> int | None:
    """The ``gl_seq`` of the first change after ``change`` of the same key (None: none waits).

    Keys compare as the source prints them (a failure path: a scan is fine).

    Raises:
        SourceError: the changelog cannot be read.
    """
    changelog = _find(objects, SourceObject.CHANGELOG_TABLE)
    values = [change.values.get(key) for key in keys]
    if changelog is None or not keys or any(value is None for value in values):
        return None
    types = {column.name: column.source_type for column in spec.columns}
    texts = [
        source.render("cast_to_text", column=key, source_type=types.get(key, "")).strip()
        for key in keys
    ]
    params: dict[str, Any] = {"seq": change.gl_seq}
    params.update({f"key_{index}": value for index, value in enumerate(values)})
    rows = source.run_query(
        "later_change_of_key",
        params,
        schema=changelog.schema,
        table=changelog.name,
        key_texts=texts,
    )
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def values_the_lake_cannot_take(
    source: SourceDialect, spec: TableSpec, keys: Sequence[str]
) -> list[str]:
    """For each column holding a value its lake type cannot take, one example: the column,
    the value and its row's key (empty: every value fits, as far as the dialect can tell).

    Enabling runs it before it creates any capture object: a copy that failed on such a
    value would leave them behind, and they would capture the value again.

    Raises:
        SourceError: the table cannot be read.
    """
    types = {column.name: column.source_type for column in spec.columns}
    key_texts = [
        source.render("cast_to_text", column=key, source_type=types.get(key, "")).strip()
        for key in keys
    ]
    found: list[str] = []
    for column in spec.columns:
        sql = source.render(
            "find_unfit_value",
            schema=spec.schema,
            table=spec.name,
            column=column,
            key_texts=key_texts,
        ).strip()
        if not sql:
            continue
        rows = source.run_query(
            "find_unfit_value",
            schema=spec.schema,
            table=spec.name,
            column=column,
            key_texts=key_texts,
        )
        if not rows:
            continue
        *key_values, value = tuple(rows[0])
        key = ", ".join(f"{name}={item}" for name, item in zip(keys, key_values, strict=True))
        kind = column.lake_type.split("(")[0].removesuffix("_ntz")
        found.append(f"column {column.name} ({kind}) holds {value} in the row {key}")
    return found


def sequence_runs(seqs: Sequence[int] | pa.Array | pa.ChunkedArray) -> list[tuple[int, int]]:
    """``seqs`` as the fewest (low, high) runs of consecutive integers that together hold
    exactly its values, in ascending order (duplicates count once). Vectorized: a batch
    holds up to millions of values, so an extraction passes its Arrow column as it is (a
    Python list of 1M values and back cost 0.1-0.3 s)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(seqs, pa.ChunkedArray):
        seqs = seqs.combine_chunks()
    values = seqs.cast(pa.int64()) if isinstance(seqs, pa.Array) else pa.array(seqs, pa.int64())
    count = len(values)
    if count == 0:
        return []
    if pc.any(pc.less_equal(values.slice(1), values.slice(0, count - 1))).as_py():
        # Out of order or repeated. A batch read in gl_seq order is neither, and skips this
        # pass (1M values: 0.39 s -> 0.15 s).
        unique = pc.unique(values)
        values = unique.take(pc.array_sort_indices(unique))
        count = len(values)
    steps = pc.subtract(values.slice(1), values.slice(0, count - 1))
    ends = pc.indices_nonzero(pc.not_equal(steps, 1))  # a run ends where the next value skips
    lows = [values[0].as_py(), *values.take(pc.add(ends, 1)).to_pylist()]
    highs = [*values.take(ends).to_pylist(), values[count - 1].as_py()]
    return list(zip(lows, highs, strict=True))


def _array_literal(values: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers (``{1,2,3}``)."""
    return "{" + ",".join(map(str, values)) + "}"


def _bound_runs_delete(
    source: SourceDialect, changelog: SourceObjectRef, runs: Sequence[tuple[int, int]]
) -> tuple[str, dict[str, Any]]:
    """One DELETE of ``runs`` with two bind parameters per run, and its parameters."""
    names = [(f"low_{index}", f"high_{index}") for index in range(len(runs))]
    sql = source.render("delete_changes", schema=changelog.schema, table=changelog.name, runs=names)
    params: dict[str, Any] = {}
    for (low_name, high_name), (low, high) in zip(names, runs, strict=True):
        params[low_name] = low
        params[high_name] = high
    return sql, params


def delete_changes(
    source: SourceDialect,
    objects: list[SourceObjectRef],
    seqs: Sequence[int] | pa.Array | pa.ChunkedArray,
) -> int:
    """Delete exactly the changelog rows whose ``gl_seq`` is in ``seqs``, in one transaction.

    Never "everything up to the highest value read": a transaction that drew a
    lower sequence value may commit after the read, and its rows must survive.

    Returns:
        The number of rows deleted.

    Raises:
        SourceError: the delete failed (nothing is deleted).
    """
    changelog = _find(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is None or len(seqs) == 0:
        return 0
    statements: list[tuple[str, dict[str, Any]]] = []
    runs = sequence_runs(seqs)
    if source.binds_arrays:
        # Runs of consecutive values, each one index range scan: a batch is usually a single
        # run, where one index lookup per value cost 3x more (ten batches of 100k from a 1M-row
        # changelog: 14.7 s -> 4.4 s). The arrays go as text literals: psycopg's per-element
        # array adaptation in Python cost 0.6 s per 100k. The template's last statement is the
        # delete; any before it set up the transaction.
        *setup, sql = source.split_script(
            source.render("delete_changes", schema=changelog.schema, table=changelog.name)
        )
        statements.extend((statement, {}) for statement in setup)
        for start in range(0, len(runs), ARRAY_DELETE_CHUNK):
            some_runs = runs[start : start + ARRAY_DELETE_CHUNK]
            statements.append(
                (
                    sql,
                    {
                        "lows": _array_literal(low for low, _ in some_runs),
                        "highs": _array_literal(high for _, high in some_runs),
                    },
                )
            )
    else:
        # The same runs as bound pairs: one short statement for the usual one-run batch, where
        # 500-value IN lists took 2,000 statements per 1M changes, each rendered and parsed
        # for its binds in Python (SQLite, 1M of a 1M-row changelog: 22 s -> 2.0 s, now
        # mostly SQLite's own b-tree work; python -m bench.changelog_deletes).
        for start in range(0, len(runs), RUNS_PER_DELETE):
            statements.append(
                _bound_runs_delete(source, changelog, runs[start : start + RUNS_PER_DELETE])
            )
    return source.execute_in_transaction(
        statements, what=f"deleting extracted changes from {changelog.schema}.{changelog.name}"
    )


__all__ = [
    "ChangeText",
    "ExistingObject",
    "SourceObjectRef",
    "capture_problems",
    "count_changes",
    "create_source_objects",
    "created_names",
    "delete_changes",
    "drop_source_objects",
    "existing_objects",
    "later_change_of_key",
    "named_source_objects",
    "object_exists",
    "plan_source_objects",
    "read_change_texts",
    "read_changes",
    "script_context",
    "sequence_position",
    "truncate_trigger_name",
    "values_the_lake_cannot_take",
]
