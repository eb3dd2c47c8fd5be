"""Disabling incremental update: dropping what gluon created, refusing what it must keep."""

from __future__ import annotations

from gluon import source as sources
from gluon.capture import existing as capture_existing
from gluon.capture import objects as source_objects
from gluon.capture import ownership
from gluon.compact.abandon import abandon_refusal
from gluon.config import Settings
from gluon.errors import StateError
from gluon.extract.feeds import FEEDS, capture_objects, feed_of
from gluon.lake import storage
from gluon.lake.changes import PARTITION_COLUMN
from gluon.lifecycle.checks import delta_table_role, enabled_before_markers, lake_table_is_ours
from gluon.lifecycle.result import IncrementalResult
from gluon.locks import lifecycle_lock
from gluon.methods import get_method
from gluon.methods.base import JOINED_KINDS, SourceObject
from gluon.naming import TableRef
from gluon.offload.copy import (
    Step,
)
from gluon.progress import timed_step
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.incremental import (
    DISABLING,
    ENABLED,
    IncrementalState,
)
from gluon.states import MergeMode

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
    existing = capture_existing.existing_objects(
        source,
        objects,
        mine,
        record.spec(),
        unmarked_are_ours=enabled_before_markers(repo, state),
        recorded=True,
    )
    droppable = [found.item for found in existing if _droppable(found, take_over_objects)]
    kept = [found for found in existing if found.item not in droppable]
    missing = [item for item in objects if item not in {found.item for found in existing}]
    refuse_unfinished_compaction(repo, ref, state)
    if state.status == ENABLED:
        feed = feed_of(state)(source, record, state, repo)
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
            f"drop {delta_table_role(state)} {state.delta_table} ({state.delta_path})",
        ),
        Step("record_disabled", f"make {record.user_view} read {record.base_table} directly"),
    ]
    result = IncrementalResult(ref.key, steps, execute)
    if not execute:
        return result
    repo.incremental.save_state(state.with_changes(status=DISABLING))
    with timed_step("drop_capture"):
        source_objects.drop_source_objects(source, droppable)
        # A table's place in a shared object that is gone already may be a leave killed
        # halfway (the last member's slot not dropped yet): the feed leaves again.
        left = droppable + [item for item in missing if item.kind in JOINED_KINDS]
        FEEDS[get_method(state.method).change_reader].release(
            source, repo, state, record.spec(), left
        )
    with timed_step("drop_delta_table"):
        if lake_table_is_ours(state.delta_path, mine):
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


def _droppable(found: capture_existing.ExistingObject, take_over: bool) -> bool:
    if found.item.kind is SourceObject.HYBRID_SCHEMA:
        return found.ownership is ownership.Ownership.OURS
    return found.adoptable(take_over)


def _why_kept(found: capture_existing.ExistingObject) -> str:
    whose = ownership.describe(found.ownership, found.marker)
    if found.item.kind is SourceObject.HYBRID_SCHEMA:
        return f"a schema gluon did not create here is never dropped ({whose})"
    if not found.shaped:
        return f"not shaped like gluon's ({whose}); gluon never drops it"
    return f"{whose}; drop it yourself, or add {ownership.TAKE_OVER_OPTION} if it is a leftover"
