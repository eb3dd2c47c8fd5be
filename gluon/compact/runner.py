"""Runs the compaction steps in order, recording each, resuming an unfinished run."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gluon.compact.context import CompactionContext, CompactionStopped
from gluon.compact.options import (
    CompactionMethod,
    CompactionOptions,
    refuse_method_for_merged_table,
)
from gluon.compact.steps import STEPS, TERMINATED, retained_base_versions
from gluon.config import Settings
from gluon.errors import GluonError, StepFailedError
from gluon.extract.insert_only import IN_PLACE_WARNING, default_compaction_method
from gluon.faults import fault_point
from gluon.lake import storage
from gluon.lake.changes import PARTITION_COLUMN
from gluon.locks import COMPACTION, compaction_lock, lifecycle_lock
from gluon.methods import get_method
from gluon.methods.base import ViewKind
from gluon.progress import NullProgress, Progress, ShownLine, timed_step
from gluon.repo import Repository
from gluon.repo.compaction import FAILED, SUCCESS, CompactionRun
from gluon.states import MergeMode

log = logging.getLogger(__name__)


@dataclass(slots=True)
class CompactionResult:
    table_key: str
    run_id: int | None = None
    method: str = ""
    changes: int = 0
    nothing_to_do: bool = False
    terminated: bool = False
    stopped: bool = False
    """Asked to stop (``stopping``): the run is open, the next compaction resumes it."""
    resumed: bool = False
    steps_run: int = 0
    warning: str = ""
    """A warning the caller was not told through ``warn`` (none given)."""
    changes_shipped: int = 0
    """Changes the extraction this compaction ran to acknowledge its diversion took from the
    source (counted as shipped, as any extraction's: ``gluon_service_changes_shipped_total``)."""
    notice: str = ""
    """A resumed run keeps its recorded options: which ones differ from this command's."""
    message: str = ""

    def shown(self) -> list[ShownLine]:
        lines = [ShownLine(self.warning, "warning")] if self.warning else []
        if self.notice:
            lines.append(ShownLine(self.notice, "note"))
        return [*lines, ShownLine(f"{self.table_key}: {self.message}")]


def run_compaction(
    settings: Settings,
    options: CompactionOptions,
    progress: Progress | None = None,
    warn: Callable[[str], None] | None = None,
    waiting: Callable[[str], None] | None = None,
    stopping: Callable[[], bool] | None = None,
) -> CompactionResult:
    """Compact ``options.table`` (holding its lifecycle lock), resuming an unfinished run.

    Extractions may run meanwhile (they acknowledge the diversion); nothing else may.

    ``warn`` receives a warning as soon as it is known (before the steps run); ``waiting``
    what the run waits for while it waits for a running extraction's acknowledgement.
    ``stopping`` is asked before each step and during waits: True ends the run there
    (``result.stopped``; the service stopping), and the next compaction resumes it.

    Raises:
        LockHeldError: another command (other than an extraction) on the table is running.
        StepFailedError: a step failed; running the command again resumes at that step.
    """
    repo = Repository(settings.repo_url)
    key = options.table.key
    _, state = repo.enabled_table(key, otherwise="nothing to compact")
    if state.merge_mode == MergeMode.IMMEDIATE:
        refuse_method_for_merged_table(options)
        return _compact_merged_table(settings, repo, options)
    method = options.method or default_compaction_method(repo, key)
    options = replace(options, method=method)
    with compaction_lock(settings, key, repo=repo):
        record, state = repo.enabled_table(key, otherwise="nothing to compact")
        result = CompactionResult(key)
        run = repo.compaction.open_run(key, state.enablement_id)
        if run is None:
            changes = storage.delta_row_count(
                state.delta_path, column=PARTITION_COLUMN, at_least=state.view_min_partition
            )
            result.changes = changes
            gone = storage.missing_delta_table_error(key, state.delta_path) if not changes else None
            if gone is not None:
                raise gone
            if changes < max(options.delta_threshold, 1):
                result.nothing_to_do = True
                result.message = (
                    f"{changes} changes in the delta table, below the threshold of "
                    f"{max(options.delta_threshold, 1)}: nothing to compact"
                )
                return result
            run = repo.compaction.start_run(
                key, method.value, options.recorded(), state.enablement_id
            )
            repo.compaction.update_run(run.id, changes=changes)
        else:
            result.resumed = True
            result.changes = run.changes or 0
            options, kept = recorded_options(run, options)
            if kept:
                result.notice = (
                    f"resuming compaction run {run.id} with the options it started with: "
                    f"{', '.join(kept)} (this command's differing options are not used)"
                )
                log.warning(result.notice)
        result.run_id, result.method = run.id, run.method
        if (
            get_method(state.method).view_kind is ViewKind.UNION_ALL
            and run.method == CompactionMethod.IN_PLACE
        ):
            warning = IN_PLACE_WARNING.format(method=state.method, view=record.user_view)
            log.warning(warning)
            if warn is not None:
                warn(warning)  # told now: the result does not carry it to be told again
            else:
                result.warning = warning
        context = CompactionContext(
            settings, repo, options, run, record, state, progress or NullProgress(), waiting
        )
        if stopping is not None:
            context.stopping = stopping
        with context.stack:
            context.refresh()
            try:
                _run_steps(context, result)
            finally:
                result.changes_shipped = context.changes_shipped
    return result


RESUMED_OPTIONS = (
    "method",
    "wait_minutes",
    "retain_obsolete_objects",
    "without_snapshot",
    "vacuum_retention_hours",
)
"""What a resumed run takes from its first command. Terminating at the acknowledgement and
the polling settings belong to each command (Example 6 resumes without terminating)."""


ADDABLE_ON_RESUME = ("retain_obsolete_objects", "without_snapshot")
"""Flags a resume may add: keeping more, or compacting without the snapshot that failed
(the way forward the snapshot step's error names)."""


def _option_text(name: str, value: Any) -> str:
    if name == "method":
        return {
            CompactionMethod.IN_PLACE: "in-place compaction",
            CompactionMethod.FULL: "--incremental-full-compaction",
            CompactionMethod.PARTITION_WISE_FULL: "--incremental-partition-wise-full-compaction",
        }[CompactionMethod(value)]
    if name == "wait_minutes":
        return f"--incremental-wait-time={float(value):g}"
    if name == "vacuum_retention_hours":
        return f"--incremental-vacuum-retention-hours={float(value):g}"
    flag = {
        "retain_obsolete_objects": "--incremental-retain-obsolete-objects",
        "without_snapshot": "--incremental-run-compaction-without-snapshot",
    }[name]
    return flag if value else f"without {flag}"


def recorded_options(
    run: CompactionRun, options: CompactionOptions
) -> tuple[CompactionOptions, list[str]]:
    """``options`` with the run's recorded choices; the texts of those that differ from an
    option the user gave (a default this command would have used is not worth a note)."""
    recorded = {**run.options, "method": run.method}
    kept: dict[str, Any] = {}
    differing = []
    for name in RESUMED_OPTIONS:
        if name not in recorded:
            continue  # a run recorded before this option existed
        current = getattr(options, name)
        value = (
            CompactionMethod(recorded[name]) if name == "method" else type(current)(recorded[name])
        )
        if name in ADDABLE_ON_RESUME:
            value = value or current
        kept[name] = value
        if value != current and options.is_given(name):
            differing.append(_option_text(name, value))
    return replace(options, **kept), differing


def _run_steps(context: CompactionContext, result: CompactionResult) -> None:
    repo = context.repo
    run_id = context.run.id
    done = repo.compaction.completed_steps(run_id)
    for step in STEPS:
        if step.name in done:
            continue
        if context.stopping():
            _stopped(result, run_id, step.name)
            return
        fault_point(f"compact.before_{step.name}")
        repo.compaction.step_started(run_id, step.name)
        context.refresh()
        try:
            with timed_step(step.name) as timing:
                detail = step.run(context)
                timing.detail = detail
        except CompactionStopped:
            context.release_session()
            _stopped(result, run_id, step.name)
            return
        except GluonError as exc:
            repo.compaction.update_run(run_id, status=FAILED, message=str(exc)[:2000])
            raise StepFailedError(
                f"compaction step {step.name} failed: {exc}; run the same command again "
                "to resume from this step",
                step=step.name,
                run_id=run_id,
            ) from exc
        except Exception as exc:
            repo.compaction.update_run(run_id, status=FAILED, message=str(exc)[:2000])
            raise
        # A session opens when a step needs one and ends with it: none idles across a wait
        # (the embedded engine ends a session idle for 15 minutes).
        context.release_session()
        if detail == TERMINATED:
            result.terminated = True
            result.message = (
                f"stopped at the acknowledgement step (run {run_id}): run an extraction, then "
                "--incremental-run-compaction again to finish"
            )
            return
        repo.compaction.step_finished(run_id, step.name, detail)
        result.steps_run += 1
        fault_point(f"compact.after_{step.name}")
    repo.compaction.update_run(run_id, status=SUCCESS, current_step=None)
    result.message = (
        f"compaction run {run_id} ({result.method}) complete: "
        f"{result.changes} changes merged into the base table"
    )


def _stopped(result: CompactionResult, run_id: int, step: str) -> None:
    """Asked to stop: the run stays open at ``step``, which the next compaction resumes."""
    result.stopped = True
    result.message = (
        f"compaction run {run_id} stopped before finishing step {step} (asked to stop): "
        "the next compaction of the table resumes it"
    )
    log.warning("%s", result.message)


FILES = "files"
"""The method a merge mode IMMEDIATE compaction run is recorded with: it rewrites files."""
FILES_STEP = "compact_files"


def _compact_merged_table(
    settings: Settings, repo: Repository, options: CompactionOptions
) -> CompactionResult:
    """Merge mode IMMEDIATE has no changes to merge: rewrite the small files the per-batch
    merges left into bigger ones, and vacuum past the retention. Holds the lifecycle lock
    (no extraction meanwhile: its merge and the rewrite would conflict).

    Recorded as a compaction run (method ``files``, no control partition) like any other,
    so status, the report and the service's schedule see it; a run a crash left open is
    finished by the next one (both operations are idempotent).
    """
    from gluon.lake.merge import compact_and_vacuum

    key = options.table.key
    # Held as COMPACTION, the holder status looks for: else a running one reads "interrupted".
    with lifecycle_lock(settings, key, COMPACTION, repo=repo):
        record, state = repo.enabled_table(key, otherwise="nothing to compact")
        result = CompactionResult(key, method=FILES)
        run = repo.compaction.open_run(key, state.enablement_id)
        if run is None:
            run = repo.compaction.start_run(key, FILES, options.recorded(), state.enablement_id)
        else:
            result.resumed = True
        result.run_id = run.id
        repo.compaction.step_started(run.id, FILES_STEP)
        fault_point("compact.before_compact_files")
        try:
            rewritten, removed = compact_and_vacuum(
                record.base_path,
                options.vacuum_retention_hours,
                retained_base_versions(repo, key, record.base_path),
            )
        except Exception as exc:
            repo.compaction.update_run(run.id, status=FAILED, message=str(exc)[:2000])
            raise
        detail = f"{rewritten} small files rewritten, {removed} files vacuumed"
        repo.compaction.step_finished(run.id, FILES_STEP, detail)
        repo.compaction.update_run(run.id, status=SUCCESS, current_step=None)
        result.steps_run = 1
    result.message = (
        f"compaction run {run.id} (merge mode IMMEDIATE: no delta table to merge) complete: "
        f"compacted {rewritten} small files of {record.base_path} and vacuumed {removed} files "
        f"older than {options.vacuum_retention_hours:g} hours"
    )
    return result
