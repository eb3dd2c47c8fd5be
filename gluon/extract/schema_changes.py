"""Source schema changes: found at each extraction and in status, carried to the lake when it can.

The repository records the columns a table had when it was offloaded
(``OffloadedTable.columns``); ``source.describe_table`` gives them now.

- **Added columns** and **widened types** (a lake type that holds every old
  value: ``int`` -> ``bigint``, ``float`` -> ``double``, a decimal with more
  digits on either side of the point) are carried: the capture tables get the
  column or the type, the capture triggers are re-created, every row's current
  image is recorded once as an update (an ``ADD COLUMN ... DEFAULT`` fills
  every row, and the old trigger did not see the column), the base and delta
  tables gain the column (a Delta metadata change) or are rewritten with the
  wider type, and the repository records the new columns.
- A changed source type whose lake type stays the same (``varchar(10)`` ->
  ``varchar(50)``) needs only the capture tables' type and the record.
- **Dropped columns** and types the lake cannot widen to are refused: the
  extraction stops in one line that says what changed and the way forward.

Every step is idempotent and the record is written last, so a run that dies
halfway does the whole change again (recording the images twice is harmless:
they are the rows' latest state).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gluon.capture import objects as source_objects
from gluon.capture import ownership
from gluon.errors import LockHeldError, NotFoundError, StateError
from gluon.extract.feeds import FEEDS, capture_objects
from gluon.faults import fault_point
from gluon.locks import LIFECYCLE, claim_lock
from gluon.methods import get_method
from gluon.methods.base import ExtractionMethod, SourceObject, ViewKind
from gluon.naming import TableRef
from gluon.offload.increments import previous_predicate
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState
from gluon.reuse import keeping, kept
from gluon.schema import Column, TableSpec
from gluon.source.base import SourceDialect

if TYPE_CHECKING:
    from gluon.lake.session import LakeOpener, LakeSession

log = logging.getLogger(__name__)

INTEGER_RANK = {"tinyint": 1, "smallint": 2, "int": 3, "bigint": 4}
_DECIMAL = re.compile(r"^decimal\((\d+),(\d+)\)$")

CAPTURE_TABLES = (SourceObject.CHANGELOG_TABLE, SourceObject.LAKE_ROWS_TABLE)
"""Capture objects that hold the table's columns."""


REFILL_HINT = (
    "to copy the values, rebuild the lake copy with offload --reset-backend-table "
    "(docs/operations.md, 'Source schema changes')"
)
"""The way to a volatile added default's values: the lake copy read again from the table."""


def unfilled_message(names: Sequence[str]) -> str:
    """The note on columns added with a per-row default no change carried (status, report,
    the extraction's warning)."""
    return (
        f"{', '.join(names)} was added with a default computed for each row, which logical "
        f"decoding does not carry: rows unchanged since show NULL in the lake; {REFILL_HINT}"
    )


def is_widening(old: str, new: str) -> bool:
    """True when lake type ``new`` holds every value of ``old`` exactly."""
    if old in INTEGER_RANK and new in INTEGER_RANK:
        return INTEGER_RANK[new] > INTEGER_RANK[old]
    if (old, new) == ("float", "double"):
        return True
    before, after = _DECIMAL.match(old), _DECIMAL.match(new)
    if before and after:
        precision, scale = int(before.group(1)), int(before.group(2))
        new_precision, new_scale = int(after.group(1)), int(after.group(2))
        return new_scale >= scale and new_precision - new_scale >= precision - scale
    return False


@dataclass(frozen=True, slots=True)
class SchemaChanges:
    """How a source table's columns differ from the recorded ones."""

    columns: tuple[Column, ...]
    """The columns to record: the recorded ones (updated) in their order, then the added."""
    added: tuple[Column, ...] = ()
    widened: tuple[Column, ...] = ()
    """Columns whose lake type widens (their new description)."""
    retyped: tuple[Column, ...] = ()
    """Columns whose source description changed, lake type unchanged."""
    refused: tuple[str, ...] = ()
    """What the lake cannot follow, one phrase each."""

    @property
    def changed(self) -> bool:
        return bool(self.added or self.widened or self.retyped or self.refused)

    @property
    def carried(self) -> bool:
        """The lake follows: the capture tables and the lake tables change."""
        return bool(self.added or self.widened)

    def summary(self) -> str:
        """The changes in a few words, for logs and status."""
        parts = [f"added {c.name} {c.source_type}" for c in self.added]
        parts += [f"widened {c.name} to {c.source_type}" for c in self.widened]
        parts += [f"{c.name} is now {c.source_type}" for c in self.retyped]
        return "; ".join([*parts, *self.refused])


def compare(recorded: tuple[Column, ...], current: tuple[Column, ...]) -> SchemaChanges:
    """The difference between the recorded columns and the source's columns now."""
    now = {column.name.lower(): column for column in current}
    kept: list[Column] = []
    widened: list[Column] = []
    retyped: list[Column] = []
    refused: list[str] = []
    for old in recorded:
        new = now.get(old.name.lower())
        if new is not None and (old.missing_value is not None or old.unfilled):
            new = replace(new, missing_value=old.missing_value, unfilled=old.unfilled)
        if new is None:
            refused.append(f"column {old.name} was dropped")
            kept.append(old)
        elif new == old:
            kept.append(old)
        elif new.lake_type == old.lake_type:
            retyped.append(new)
            kept.append(new)
        elif is_widening(old.lake_type, new.lake_type):
            widened.append(new)
            kept.append(new)
        else:
            refused.append(f"column {old.name} changed from {old.source_type} to {new.source_type}")
            kept.append(old)
    names = {column.name.lower() for column in recorded}
    added = tuple(column for column in current if column.name.lower() not in names)
    return SchemaChanges(
        columns=(*kept, *added),
        added=added,
        widened=tuple(widened),
        retyped=tuple(retyped),
        refused=tuple(refused),
    )


def source_changes(source: SourceDialect, record: OffloadedTable) -> SchemaChanges:
    """How ``record``'s source table differs from what the repository recorded.

    Raises:
        SourceError, NotFoundError: the table cannot be described.
    """
    ref = TableRef(record.source_schema, record.source_table)
    if not keeping():
        return compare(record.columns, source.describe_table(ref).columns)
    # The service: describe the table again only when its catalog version moved.
    described: dict[tuple[str, str], tuple[str, TableSpec]] = kept(
        ("described tables", str(source.engine.url)), dict, per_thread=False
    )
    version = source.catalog_version(ref)
    known = described.get((ref.schema, ref.table))
    if version is not None and known is not None and known[0] == version:
        return compare(record.columns, known[1].columns)
    spec = source.describe_table(ref)
    if version is not None:
        described[(ref.schema, ref.table)] = (version, spec)
    return compare(record.columns, spec.columns)


def refusal(table_key: str, changes: SchemaChanges) -> StateError:
    """The one line that stops an extraction over a change the lake cannot follow."""
    return StateError(
        f"{table_key} changed in the source in a way the lake cannot follow "
        f"({'; '.join(changes.refused)}); nothing was extracted: restore the column to go on, "
        "or rebuild the lake copy (docs/operations.md, 'Source schema changes')"
    )


def carry_changes(
    source: SourceDialect,
    repo: Repository,
    record: OffloadedTable,
    state: IncrementalState,
    *,
    open_lake: LakeOpener,
    run_dir: Path,
) -> OffloadedTable:
    """Bring the capture objects, the lake tables and the record up to the source's columns.

    Called by an extraction, under its lock, before reading changes. ``open_lake`` opens the
    session that evolves the Delta tables; ``run_dir`` holds the table's lock files.

    Returns:
        The table's record, updated when the lake followed a change.

    Raises:
        StateError: a change the lake cannot follow (nothing is changed).
    """
    try:
        changes = source_changes(source, record)
    except NotFoundError as exc:
        # The changes already captured can still be shipped; the table's absence is
        # for the capture objects' checks to report.
        log.warning("cannot compare the columns of %s: %s", record.table_key, exc)
        return record
    if not changes.changed:
        return record
    if changes.refused:
        raise refusal(record.table_key, changes)
    if not changes.carried:  # the capture tables and the record only
        return _carry(open_lake, source, repo, record, state, changes)
    with ExitStack() as stack:
        try:
            # A compaction rewrites the base with the columns it read at its start.
            # Under the extraction lock only a compaction can hold the lifecycle lock.
            stack.enter_context(
                claim_lock(
                    run_dir,
                    record.table_key,
                    LIFECYCLE,
                    "offload --incremental-run-extraction (carrying a source schema change)",
                    lambda: repo,
                )
            )
        except LockHeldError:
            return _postponed(record, changes)
        if repo.compaction.open_run(record.table_key) is not None:
            return _postponed(record, changes)
        return _carry(open_lake, source, repo, record, state, changes)


def _postponed(record: OffloadedTable, changes: SchemaChanges) -> OffloadedTable:
    log.warning(
        "%s changed in the source (%s): carried to the lake after the compaction under way",
        record.table_key,
        changes.summary(),
    )
    return record


def _carry(
    open_lake: LakeOpener,
    source: SourceDialect,
    repo: Repository,
    record: OffloadedTable,
    state: IncrementalState,
    changes: SchemaChanges,
) -> OffloadedTable:
    log.info("carrying source schema changes of %s: %s", record.table_key, changes.summary())
    spec = TableSpec(
        schema=record.source_schema,
        name=record.source_table,
        columns=changes.columns,
        primary_key=record.primary_key,
    )
    objects = capture_objects(state)
    _alter_capture_tables(source, objects, changes)
    method = get_method(state.method)
    if method.fills_added_defaults and changes.added:
        changes = _with_stored_defaults(source, record, changes)
    marker = ownership.Marker(repo.installation_id, record.table_key)
    source_objects.create_source_objects(source, spec, method, objects, state.key_columns, marker)
    fault_point("schema.after_capture_objects")
    if changes.carried:
        changelog = next((o for o in objects if o.kind is SourceObject.CHANGELOG_TABLE), None)
        # Only where the lake follows the application table's rows alone, and merges them:
        # insert-only methods would show each image as one more row, and where patches
        # arrive through an updatable view the table's image would undo them.
        follows_table = method.has_object(SourceObject.CHANGELOG_TRIGGER)
        patched = method.has_object(SourceObject.UPDATABLE_VIEW)
        if changelog is not None and follows_table and method.view_kind is ViewKind.MERGE:
            if patched and changes.added:
                log.warning(
                    "%s: rows unchanged since %s was added show it as NULL in the lake "
                    "(recording the table's rows would undo patches made through the view)",
                    record.table_key,
                    ", ".join(column.name for column in changes.added),
                )
            elif not patched:
                _record_table_images(source, repo, spec, method, objects, state)
                fault_point("schema.after_row_images")
        with open_lake() as session:
            for location, name in (
                (record.base_path, record.base_table),
                (state.delta_path, state.delta_table),
            ):
                evolve_delta_table(session, name, location, changes)
                fault_point("schema.after_delta_evolution")
                if method.fills_added_defaults:
                    _fill_stored_defaults(source, session, name, location, changes)
                    fault_point("schema.after_fill_stored_defaults")
        feed = FEEDS[method.change_reader]
        if changes.added and feed.read_rows_again(source, repo, record, state, changes.added):
            # Before the record: a run killed in between moves the position back again.
            log.info(
                "%s: every row is read again at this extraction, with %s",
                record.table_key,
                ", ".join(column.name for column in changes.added),
            )
    repo.update_columns(record.table_key, changes.columns)
    return replace(record, columns=changes.columns)


def _with_stored_defaults(
    source: SourceDialect, record: OffloadedTable, changes: SchemaChanges
) -> SchemaChanges:
    """``changes`` with each added column's ``missing_value``: the default the source keeps
    for the rows that existed before the ADD COLUMN (their changes, decoded without the
    column, and the lake's rows read it). A default written into each row instead (a
    volatile one) no change carried: that is reported, with the way to the values."""
    stored = source.stored_defaults(TableRef(record.source_schema, record.source_table))
    added: list[Column] = []
    for column in changes.added:
        found = stored.get(column.name)
        rewritten = found is not None and found.rewritten
        if rewritten:
            log.warning("%s: %s", record.table_key, unfilled_message([column.name]))
        added.append(
            replace(
                column,
                missing_value=found.missing_value if found else None,
                unfilled=rewritten,
            )
        )
    by_name = {column.name: column for column in added}
    columns = tuple(by_name.get(column.name, column) for column in changes.columns)
    return replace(changes, columns=columns, added=tuple(added))


def _fill_stored_defaults(
    source: SourceDialect, session: LakeSession, name: str, location: str, changes: SchemaChanges
) -> None:
    """Every row of a lake table, shipped before the source's ADD COLUMN (the record still
    has the old columns: nothing later was shipped), gets each added column's stored
    default. Running it again after a kill gives the same table."""
    from gluon.lake import tables

    values = [
        (column, source.stored_default_value(column.missing_value, column))
        for column in changes.added
        if column.missing_value is not None
    ]
    tables.fill_columns(session, name, location, values)


def _record_table_images(
    source: SourceDialect,
    repo: Repository,
    spec: TableSpec,
    method: type[ExtractionMethod],
    objects: list[source_objects.SourceObjectRef],
    state: IncrementalState,
) -> None:
    """Record every offloaded row's current image in the changelog, in one transaction.

    A partially offloaded table's rows not offloaded yet stay out: their images would
    reach the lake before their offload, which would then be refused as touched rows.
    """
    offloaded = previous_predicate(repo.increments.increments(state.table_key))
    where, params = offloaded.to_source_sql(spec.columns, source.quote) if offloaded else ("", {})
    params = source.adapt_params(params)
    context = source_objects.script_context(source, spec, method, objects, state.key_columns)
    script = source.render("record_table_images", **context, where=where)
    source.execute_in_transaction(
        [(statement, params) for statement in source.split_script(script)],
        what=f"recording the rows of {state.table_key} after a schema change",
    )


def _alter_capture_tables(
    source: SourceDialect, objects: list[source_objects.SourceObjectRef], changes: SchemaChanges
) -> None:
    source.read_server_limits()  # the changelog's wide types depend on them (Oracle)
    for item in objects:
        if item.kind not in CAPTURE_TABLES:
            continue
        present = source.describe_table(TableRef(item.schema, item.name))
        for column in changes.added:
            if not present.has_column(column.name):
                column_type = _capture_column_type(source, item, column)
                source.execute_script(
                    "alter_add_column", object=item, column=column, column_type=column_type
                )
        for column in (*changes.widened, *changes.retyped):
            column_type = _capture_column_type(source, item, column)
            if present.column(column.name).source_type != column_type:
                source.execute_script(
                    "alter_column_type", object=item, column=column, column_type=column_type
                )


def _capture_column_type(
    source: SourceDialect, item: source_objects.SourceObjectRef, column: Column
) -> str:
    """The type ``column`` gets in capture table ``item``: the changelog's wide type, never
    the application's declared one (NUMBER to NUMBER(20,2) would fail with ORA-01440 on a
    changelog holding rows, a narrowed VARCHAR2 would fail the trigger on the next
    widening); the lake-rows table mirrors the application table."""
    if item.kind is SourceObject.CHANGELOG_TABLE:
        return source_objects.changelog_type(
            type(source), column.source_type, extended_strings=source.extended_strings
        )
    return column.source_type


def evolve_delta_table(
    session: LakeSession, name: str, location: str, changes: SchemaChanges
) -> None:
    """Give the Delta table at ``location`` the added columns and the widened types
    (the lake layer's :func:`gluon.lake.tables.evolve_table`)."""
    from gluon.lake import tables

    tables.evolve_table(session, name, location, added=changes.added, widened=changes.widened)
