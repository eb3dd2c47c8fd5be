"""Enabling incremental update: capture objects first, the copy, then the lake objects."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace

from gluon.capture import changelog, objects, ownership
from gluon.capture import existing as capture_existing
from gluon.capture.objects import SourceObjectRef
from gluon.capture.statement_level import captures_by_statement
from gluon.config import Settings
from gluon.errors import GluonError, LakeError, StateError, UsageError
from gluon.extract.feeds import FEEDS
from gluon.faults import fault_raise
from gluon.lake import storage
from gluon.lake.changes import create_delta_table
from gluon.lake.session import open_session
from gluon.lifecycle.checks import delta_table_role, lake_table_is_ours, object_labels
from gluon.lifecycle.enable_plan import (
    EnableOptions,
    EnablePlan,
    not_recommended,
    plan_enable,
    slot_to_export,
)
from gluon.lifecycle.result import IncrementalResult
from gluon.locks import lifecycle_lock
from gluon.methods.base import SNAPSHOT_KINDS
from gluon.naming import TableRef
from gluon.offload.copy import (
    OFFLOADED,
    OFFLOADING,
    OffloadOptions,
    Step,
    execute_offload,
    plan_steps,
)
from gluon.progress import NullProgress, Progress, timed_step
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.incremental import (
    ENABLED,
    ENABLING,
)
from gluon.states import MergeMode

log = logging.getLogger(__name__)


def _enable_steps(plan: EnablePlan) -> list[Step]:
    statement_level = captures_by_statement(
        plan.source, plan.method, plan.spec.schema, plan.spec.name
    )
    steps = [
        Step(
            "create_capture",
            f"create {object_.object_type.lower()} {object_.display_name} in the source"
            + _trigger_names(plan, object_, statement_level)
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
            f"create {delta_table_role(plan.state)} {plan.state.delta_table} at "
            f"{plan.state.delta_path}",
        ),
        Step("record_enabled", "record incremental update as enabled in the repository"),
    ]
    return steps


def _trigger_names(plan: EnablePlan, item: SourceObjectRef, statement_level: bool) -> str:
    """Every trigger the create script makes for ``item``, where that is not one trigger
    of its name (one per event, the TRUNCATE one, statement triggers)."""
    names = objects.created_names(plan.source, plan.method, item, statement_level)
    return f": triggers {', '.join(names)}" if names != (item.name,) else ""


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
    plan = plan_enable(settings, options, offload, repo)
    for advice in (not_recommended(plan.spec, plan.method), _copy_older_than_capture(plan)):
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


def _copy_older_than_capture(plan: EnablePlan) -> str | None:
    """What enabling again over the copy an earlier enablement left (no new copy) misses.

    Changes made while incremental update was disabled fired no capture: they never reach
    the lake, and every reader differs from the source until the table is copied anew.
    """
    if plan.offload is not None or plan.resume:
        return None
    enablements = plan.repo.incremental.enablements(plan.state.table_key)
    if not any(enablement["disabled_at"] is not None for enablement in enablements):
        return None
    table = plan.state.table_key
    return (
        f"{table}: enabled again over the lake copy as it was when incremental update was "
        "disabled: source changes made since then are not in the lake and never will be; "
        f"if there were any, run offload -t {table} -x --incremental-updates-disabled, then "
        "enable again with --reset-backend-table to copy the table anew"
    )


def _execute_enable(
    settings: Settings,
    plan: EnablePlan,
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
        objects.drop_source_objects(plan.source, plan.taken_over)
    if take_over_objects and ownership.lake_table_marker(state.delta_path) != (plan.marker):
        storage.remove_table(state.delta_path)
    with ExitStack() as exporting:
        with timed_step("create_capture"):
            slot = slot_to_export(plan)
            if slot is not None:
                # Open until the copy is done: the copy reads under the slot's snapshot.
                exporting.enter_context(objects.slot_exporting_snapshot(plan.source, slot))
            # What the table shares with others (a database's slot) is joined by its feed,
            # its snapshot held for the copy in the same way.
            exporting.enter_context(
                FEEDS[plan.method.change_reader].capturing(
                    plan.source,
                    plan.repo,
                    state,
                    plan.spec,
                    plan.objects,
                    copying=bool(plan.offload),
                )
            )
            objects.create_source_objects(
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


def _refuse_unfit_values(plan: EnablePlan) -> None:
    """Refuse to enable (and copy) a table holding values the lake cannot take, before any
    capture object exists: the copy would fail on them after the trigger (or slot) had
    captured changes, and those changes would hold the value again.

    Raises:
        UsageError: the table holds such values (one line: where, and what to do).
    """
    found = changelog.values_the_lake_cannot_take(plan.source, plan.spec, plan.keys)
    if not found:
        return
    raise UsageError(
        f"{plan.spec.schema}.{plan.spec.name} holds values the lake cannot take: "
        f"{'; '.join(found)}. Update those rows to values the lake can take (or NULL) and run "
        "the same command again; no capture object was created (docs/operations.md, 'A change "
        "the lake cannot take')"
    )


def _undo_failed_enable(plan: EnablePlan) -> str:
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
        existing = capture_existing.existing_objects(
            plan.source, plan.objects, plan.marker, plan.spec, recorded=True
        )
        ours = [found.item for found in existing if found.ownership is ownership.Ownership.OURS]
        objects.drop_source_objects(plan.source, ours)
        FEEDS[plan.method.change_reader].release(
            plan.source, plan.repo, plan.state, plan.spec, plan.objects
        )
        if storage.delta_version(plan.state.delta_path) is not None and lake_table_is_ours(
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
    log.info("undid the failed enable of %s: dropped %s", key, object_labels(ours) or "nothing")
    return (
        "the enable was undone (its capture objects were dropped, nothing it captured will "
        "ship): fix the cause and run the same command again"
    )


def _redo_copy_next_time(plan: EnablePlan) -> None:
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


def initial_offload_needed(settings: Settings, ref: TableRef, reset_backend_table: bool) -> bool:
    """Whether enabling ``ref`` offloads it first (it is not offloaded, or is to be reset)."""
    record = Repository(settings.repo_url, create=True).get_table(ref.key)
    return reset_backend_table or record is None or record.status != OFFLOADED
