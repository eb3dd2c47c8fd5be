"""What an enable finds already there: capture objects, a delta table, an earlier enable."""

from __future__ import annotations

import logging

from gluon import source as sources
from gluon.capture import existing as capture_existing
from gluon.capture import objects as source_objects
from gluon.capture import ownership
from gluon.config import Settings
from gluon.errors import GluonError, StateError, UsageError
from gluon.extract.feeds import capture_objects
from gluon.lake import storage
from gluon.methods.base import SourceObject
from gluon.repo import Repository
from gluon.repo.incremental import (
    ENABLED,
    ENABLING,
    IncrementalState,
)
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect
from gluon.states import MergeMode

log = logging.getLogger(__name__)


def check_existing_objects(
    source: SourceDialect,
    spec: TableSpec,
    objects: list[source_objects.SourceObjectRef],
    marker: ownership.Marker,
    take_over: bool,
    *,
    legacy: bool = False,
    recorded: bool = False,
) -> list[source_objects.SourceObjectRef]:
    """Refuse existing objects gluon did not make for this table here; return those to take over.

    A schema is never refused: several tables (and installations) may share one.

    Raises:
        StateError: an object exists that this installation cannot use (the message says whose
            it is and how to go on).
    """
    taken_over: list[source_objects.SourceObjectRef] = []
    existing = capture_existing.existing_objects(
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


def check_delta_table(
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


def delta_table_role(state: IncrementalState) -> str:
    """What the table at ``state.delta_path`` is: IMMEDIATE mode stages each batch there."""
    return "staging table" if state.merge_mode == MergeMode.IMMEDIATE else "delta table"


def enable_interrupted(repo: Repository, state: IncrementalState, method: str) -> bool:
    """An enable of ``method`` died after saving the enabled state and before dating its
    enablement (its last step): a re-run of the same command finishes it rather than
    refusing a table it left half recorded."""
    if state.status != ENABLED or state.method != method or state.enablement_id is None:
        return False
    for enablement in repo.incremental.enablements(state.table_key):
        if enablement["id"] == state.enablement_id:
            return enablement["enabled_at"] is None
    return False


def resumes_enable(
    settings: Settings, table_key: str, method: str, repo: Repository | None = None
) -> bool:
    """An enable of ``method`` was killed (its state ``enabling``, or enabled and not yet
    dated): the command runs it again, and a ``--reset-backend-table`` in it copies anew
    (the killed run's copy may be published but not recorded, or not made)."""
    repo = repo or Repository(settings.repo_url, create=True)
    state = repo.incremental.get_state(table_key)
    return (
        state is not None
        and state.method == method
        and (state.status == ENABLING or enable_interrupted(repo, state, method))
    )


# -- repairing ------------------------------------------------------------------------------


def enabled_before_markers(repo: Repository, state: IncrementalState) -> bool:
    """The table was enabled before this installation marked what it creates (an upgrade)."""
    enabled_at = state.enabled_at
    return enabled_at is not None and enabled_at < repo.installation_created_at


def missing_objects(
    source: SourceDialect, objects: list[source_objects.SourceObjectRef], installation: str
) -> list[source_objects.SourceObjectRef]:
    """``objects`` that do not exist, and schemas they need that do not exist (first); a
    table's place in a shared slot is looked up in ``installation``'s publication."""
    missing = [
        item for item in objects if not source_objects.object_exists(source, item, installation)
    ]
    if source.has_schemas:
        recorded = {item.schema for item in objects if item.kind is SourceObject.HYBRID_SCHEMA}
        needed = dict.fromkeys(item.schema for item in missing if item.schema not in recorded)
        for schema in needed:
            candidate = source_objects.SourceObjectRef(
                SourceObject.HYBRID_SCHEMA, schema, schema, "SCHEMA"
            )
            if not source_objects.object_exists(source, candidate):
                missing.insert(0, candidate)
    return missing


def object_labels(objects: list[source_objects.SourceObjectRef]) -> str:
    return ", ".join(f"{item.object_type.lower()} {item.display_name}" for item in objects)


def already_enabled(settings: Settings, state: IncrementalState, installation: str) -> str:
    """The refusal of a second enable: says what is missing when capture objects are gone
    (``installation``: the repository's id, whose shared slot holds its members)."""
    message = f"incremental update is already enabled for {state.table_key} ({state.method})"
    objects = capture_objects(state)
    if state.status != ENABLED or not objects or not settings.source_url:
        return message
    try:
        missing = missing_objects(
            sources.connect(settings.source_url, settings.source_timeouts), objects, installation
        )
    except GluonError:
        return message  # the refusal stands; the source's trouble shows in the next command
    if not missing:
        return message
    return (
        f"{message}, but {object_labels(missing)} are missing (dropped outside gluon): add "
        "--incremental-recreate-capture-objects to re-create them"
    )


def lake_table_is_ours(location: str, mine: ownership.Marker) -> bool:
    """Unmarked delta tables predate markers: the repository recorded them, so they are ours."""
    found = ownership.lake_table_marker(location)
    return found is None or ownership.classify(found, mine) is ownership.Ownership.OURS


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
