"""Ending an unfinished compaction run without finishing it (--incremental-abandon-compaction).

Until its views switch, a run has changed nothing a reader depends on: the
views still read the old base and every control partition from the view's
lowest one. Abandoning such a run removes the tables it wrote for itself (the
in-place stage, the new base of a full compaction), withdraws a diversion
request no extraction has acknowledged yet, and marks the run abandoned, so
the next compaction starts afresh. A diversion already acknowledged stays:
the views read that partition too, and the next run compacts it.

Two runs cannot be abandoned and must be finished instead: one whose views
have switched (its compacted partitions are no longer read and will be
dropped), and an in-place run of an insert-only table that has begun
rewriting its base (the rewritten rows would then show twice).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gluon.compact.context import CompactionContext
from gluon.compact.options import CompactionMethod, CompactionOptions
from gluon.compact.rewrite import (
    in_place_stage_path,
    load_table_location,
    staged_base_path,
    staged_tables,
)
from gluon.config import Settings
from gluon.errors import StateError
from gluon.lake import publish, storage
from gluon.locks import lifecycle_lock
from gluon.methods import get_method
from gluon.methods.base import ViewKind
from gluon.naming import TableRef
from gluon.progress import NullProgress, ShownLine, plan_lines, sentence
from gluon.repo import Repository
from gluon.repo.compaction import ABANDONED, OPEN_STATUSES, CompactionRun
from gluon.repo.incremental import ENABLED, IncrementalState

log = logging.getLogger(__name__)

SWITCHED_STEPS = ("switch_views", "drop_obsolete", "vacuum")
"""Once one of these has started, the run must be finished."""


@dataclass(frozen=True, slots=True)
class AbandonStep:
    name: str
    description: str


@dataclass(slots=True)
class AbandonResult:
    table_key: str
    run_id: int
    steps: list[AbandonStep]
    executed: bool
    message: str = ""

    def shown(self) -> list[ShownLine]:
        if self.executed:
            return [sentence(self.message)]
        return plan_lines(self.table_key, [step.description for step in self.steps])


def abandon_refusal(repo: Repository, run: CompactionRun, state: IncrementalState) -> str | None:
    """Why ``run`` must be finished rather than abandoned (None: it can be abandoned)."""
    started = {step.step for step in repo.compaction.steps(run.id)}
    finish = f"finish it with `offload -t {run.table_key} -x --incremental-run-compaction`"
    if started & set(SWITCHED_STEPS) or state.view_min_partition == run.new_partition:
        return f"compaction run {run.id} of {run.table_key} has switched its views: {finish}"
    in_place = run.method == CompactionMethod.IN_PLACE
    if (
        in_place
        and "compact" in started
        and get_method(state.method).view_kind is ViewKind.UNION_ALL
    ):
        return (
            f"compaction run {run.id} of {run.table_key} has begun rewriting the base of an "
            f"insert-only table in place (abandoning it would show those rows twice): {finish}"
        )
    return None


def _context(settings: Settings, repo: Repository, run: CompactionRun) -> CompactionContext:
    record = repo.get_table(run.table_key)
    state = repo.incremental.get_state(run.table_key)
    if record is None or state is None:
        raise StateError(
            f"{run.table_key} has no offload record or incremental state: compaction run "
            f"{run.id} cannot be abandoned"
        )
    options = CompactionOptions(table=TableRef.parse(run.table_key))
    return CompactionContext(settings, repo, options, run, record, state, NullProgress())


def _leftovers(context: CompactionContext) -> list[str]:
    """Locations of the tables the run wrote for itself and that exist."""
    locations = {load_table_location(context, "compacted")}
    if not publish.published(context.record.base_path, context.run.id):
        # Once published, the staged files are the base table's: never delete them.
        locations.add(staged_base_path(context))
        locations.add(in_place_stage_path(context))  # differs for a base an older gluon moved
    older = context.run.progress.get("new_base_path")  # a run an older gluon started
    if older:
        locations.add(str(older))
    locations.update(str(location) for location in staged_tables(context))
    return sorted(
        location
        for location in locations
        if location != context.record.base_path and storage.delta_version(location) is not None
    )


def _plan(context: CompactionContext) -> list[AbandonStep]:
    run, state = context.run, context.state
    steps = [
        AbandonStep(
            "mark_abandoned",
            f"record compaction run {run.id} ({run.method}, at step "
            f"{run.current_step or 'none'}) as abandoned",
        )
    ]
    if (
        state.requested_partition == run.new_partition
        and state.acknowledged_partition != run.new_partition
    ):
        steps.append(
            AbandonStep(
                "withdraw_diversion",
                f"withdraw the request to divert change ingestion to control partition "
                f"{run.new_partition} (extractions keep writing to {state.active_partition})",
            )
        )
    steps += [
        AbandonStep("remove_table", f"delete table {location} that the run wrote")
        for location in _leftovers(context)
    ]
    return steps


def abandon_compaction(settings: Settings, ref: TableRef, *, execute: bool) -> AbandonResult:
    """End the unfinished compaction run of ``ref`` if its views have not switched.

    Raises:
        StateError: no unfinished run, or one that must be finished (the message says how).
        LockHeldError: the run's compaction is still running.
    """
    repo = Repository(settings.repo_url)
    key = ref.key
    repo.require_known(key)
    state = repo.incremental.get_state(key)
    if state is None or state.status != ENABLED:
        raise StateError(f"incremental update is not enabled for {key}: no compaction to abandon")
    run = repo.compaction.open_run(key, state.enablement_id)
    if run is None:
        raise StateError(f"{key} has no unfinished compaction run: nothing to abandon")
    refusal = abandon_refusal(repo, run, state)
    if refusal:
        raise StateError(refusal)
    result = AbandonResult(key, run.id, _plan(_context(settings, repo, run)), execute)
    if not execute:
        return result
    with lifecycle_lock(settings, key, "offload --incremental-abandon-compaction", repo=repo):
        current = repo.compaction.get_run(run.id)
        state = repo.incremental.get_state(key) or state
        if current is None or current.status not in OPEN_STATUSES:
            raise StateError(f"compaction run {run.id} of {key} is no longer unfinished")
        refusal = abandon_refusal(repo, current, state)
        if refusal:
            raise StateError(refusal)
        context = _context(settings, repo, current)
        leftovers = _leftovers(context)
        # The run is marked first: a crash afterwards leaves files to delete, never a run
        # that a later compaction would resume over a half-removed table.
        repo.compaction.update_run(
            run.id,
            status=ABANDONED,
            current_step=None,
            message=f"abandoned at step {current.current_step or 'none'} "
            "(--incremental-abandon-compaction)",
        )
        log.info("compaction run %d of %s abandoned", run.id, key)
        if (
            state.requested_partition == current.new_partition
            and state.acknowledged_partition != current.new_partition
        ):
            # An extraction that read the request before this keeps it consistent: it writes
            # to that partition, then makes it the active one, which the views read.
            repo.incremental.update_state(key, requested_partition=None, requested_at=None)
        for location in leftovers:
            if storage.remove_table(location):
                log.info("removed %s (written by abandoned compaction run %d)", location, run.id)
    result.message = (
        f"compaction run {run.id} of {key} abandoned; the next --incremental-run-compaction "
        "starts a new run"
    )
    return result
