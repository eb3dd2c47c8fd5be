"""The capture objects already in a source: what they are, whose they are, what is wrong."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gluon.capture.objects import (
    CHANGELOG_SHAPE,
    SourceObjectRef,
    creation_rank,
    find_object,
    object_exists,
    statement_trigger_names,
    truncate_trigger_name,
)
from gluon.capture.ownership import (
    TAKE_OVER_OPTION,
    Marker,
    Ownership,
    classify,
    describe,
    parse_marker,
)
from gluon.methods.base import (
    JOINED_KINDS,
    UNMARKED_KINDS,
    SourceObject,
)
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect

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
    A table's place in a shared slot is looked up in ``mine``'s installation's publication:
    another installation's shared slot is its own, not an object in the way, and one found
    in this installation's is ours (recorded or not: the publication's name is the mark).

    Raises:
        SourceError: the catalog cannot be read.
    """
    found: list[ExistingObject] = []
    unmarkable = source.unmarkable_source_objects
    for item in sorted(objects, key=creation_rank):
        if not object_exists(source, item, mine.installation_id) or item.kind in unmarkable:
            continue
        marker = _marker(source, item)
        per_table = item.kind is not SourceObject.HYBRID_SCHEMA
        ownership = classify(marker, mine, per_table=per_table)
        shaped = _shaped(source, spec, item)
        if ownership is Ownership.FOREIGN and shaped and unmarked_are_ours:
            ownership = Ownership.OURS
        if item.kind in UNMARKED_KINDS and marker is None and recorded:
            ownership = Ownership.OURS
        if item.kind in JOINED_KINDS:
            # Found in this installation's shared object (its name is the mark), under
            # this table's name: this table's place there, whoever put it in.
            ownership = Ownership.OURS
        found.append(ExistingObject(item, ownership, marker, shaped))
    changelog = next((o for o in found if o.item.kind is SourceObject.CHANGELOG_TABLE), None)
    for item in objects:
        if item.kind in unmarkable and object_exists(source, item, mine.installation_id):
            unmarked = Ownership.OURS if unmarked_are_ours else Ownership.FOREIGN
            judged = changelog or ExistingObject(item, unmarked, None, True)
            found.append(ExistingObject(item, judged.ownership, judged.marker, True))
    return sorted(found, key=lambda existing: creation_rank(existing.item))


def capture_problems(
    source: SourceDialect,
    table: TableSpec,
    objects: Sequence[SourceObjectRef],
    *,
    truncate: bool = True,
    changelog_read: bool = False,
    trigger_states: Sequence[Sequence[Any]] | None = None,
) -> list[str]:
    """What stops changes to ``table`` from being captured now: a capture trigger that is
    disabled or gone, a changelog that is gone (each one line, with the way out); with
    ``truncate``, also a TRUNCATE trigger that is disabled or gone (tables enabled before
    TRUNCATE was captured have none until their capture objects are re-created: status
    says so, while extraction, which passes False, does not fail every run for it).

    Changes the application made meanwhile were never recorded: only a new
    offload brings the lake back in step.

    ``changelog_read``: the caller has just read the changelog (a report counts every
    changelog of a database in one query), so it exists and is not looked up again.
    ``trigger_states``: the ``capture_trigger_state`` rows of the table's trigger, read
    for many tables at once (``capture_trigger_states_of``), so not read again.

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
    changelog = find_object(objects, SourceObject.CHANGELOG_TABLE)
    if changelog is not None and not changelog_read and not object_exists(source, changelog):
        problems.append(
            f"changelog table {changelog.schema}.{changelog.name} of {table.schema}.{table.name} "
            "is missing: " + recreate
        )
    trigger = find_object(objects, SourceObject.CHANGELOG_TRIGGER)
    if trigger is None:
        return problems
    truncate_name = truncate_trigger_name(source, trigger)
    rows = trigger_states
    if rows is None:
        params = _trigger_state_params(source, table, trigger)
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
            source.render(
                "enable_capture_trigger",
                trigger=trigger,
                table=table,
                names=[row[0] for row in row_triggers if row[1] is False],
            ).split()
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


def _trigger_state_params(
    source: SourceDialect, table: TableSpec, trigger: SourceObjectRef
) -> dict[str, Any]:
    statement_triggers = statement_trigger_names(source, trigger)
    return {
        "schema": trigger.schema,
        "name": trigger.name,
        "truncate_name": truncate_trigger_name(source, trigger),
        "insert_name": statement_triggers["INSERT"],
        "delete_name": statement_triggers["DELETE"],
        "table_schema": table.schema,
        "table_name": table.name,
    }


def capture_trigger_states_of(
    source: SourceDialect, triggers: Sequence[tuple[TableSpec, SourceObjectRef]]
) -> list[list[tuple[Any, ...]]]:
    """The ``capture_trigger_state`` rows of each (table, capture trigger) of ``triggers``,
    in their order, from one query (a report over 200 tables made one a table); pass each
    to :func:`capture_problems` as ``trigger_states``.

    Raises:
        SourceError: one of them cannot be read (check them one by one to find which).
    """
    if not triggers:
        return []
    params: dict[str, Any] = {}
    for number, (table, trigger) in enumerate(triggers):
        params[f"n{number}"] = number
        for name, value in _trigger_state_params(source, table, trigger).items():
            params[f"t{number}_{name}"] = value
    items = [trigger for _, trigger in triggers]
    found: list[list[tuple[Any, ...]]] = [[] for _ in triggers]
    for row in source.run_query("capture_trigger_states", params, items=items):
        found[int(row[0])].append(tuple(row[1:]))
    return found
