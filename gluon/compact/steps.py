"""The compaction steps, in order. Each is idempotent: its docstring says what a re-run does.

A step returns a one-line detail for the repository, or ``TERMINATED`` to stop
the run cleanly (single-session compaction at the acknowledgement step).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from gluon import locks
from gluon.compact.context import CompactionContext
from gluon.compact.options import CompactionMethod
from gluon.compact.rewrite import REWRITES, retained_changes_table, staged_tables
from gluon.errors import GluonError, LakeError, LockHeldError, StateError
from gluon.extract.run import run_extraction
from gluon.faults import fault_point, fault_raise
from gluon.lake import publish, sql, storage, tables
from gluon.lake.changes import PARTITION_COLUMN, drop_control_partitions
from gluon.naming import retained_base_table, stable_base_path
from gluon.repo import Repository
from gluon.repo.common import now
from gluon.repo.compaction import WAITING

log = logging.getLogger(__name__)

TERMINATED = "terminated at the acknowledgement step"


def request_diversion(context: CompactionContext) -> str:
    """Ask extractions to write to a new control partition. Re-run: asks for the same one."""
    if context.run.new_partition is None:
        compacted = context.state.active_partition
        # One write: a crash between the partitions and the progress left a run no resume
        # could read (the model test found it).
        context.repo.compaction.update_run(
            context.run.id,
            compacted_partition=compacted,
            new_partition=compacted + 1,
            progress={**context.run.progress, "min_partition": context.state.view_min_partition},
        )
        context.refresh()
    elif "min_partition" not in context.run.progress:
        # A run recorded by a release that wrote the two separately and died in between.
        context.save_progress(min_partition=context.state.view_min_partition)
    if context.run.new_partition is None:
        raise StateError(f"compaction run {context.run.id} has no new control partition recorded")
    if context.state.requested_partition != context.run.new_partition:
        context.repo.incremental.update_state(
            context.record.table_key,
            requested_partition=context.run.new_partition,
            requested_at=now(),
        )
        context.refresh()
    return f"requested control partition {context.run.new_partition}"


class AcknowledgementTimeoutError(GluonError):
    """No extraction acknowledged the diversion within ``--incremental-acknowledgement-timeout``."""


def await_acknowledgement(context: CompactionContext) -> str:
    """Have an extraction write to the new partition. Re-run: checks again.

    When no extraction holds the table's extraction lock, this command runs the
    acknowledging extraction itself (it ships what is pending into the new partition), so a
    compaction completes in one command without a scheduled extraction. When one holds it
    (a cron run), the compaction waits for that run, reporting what it waits for.
    """
    context.release_session()  # never hold an engine session across a wait
    wait = _AcknowledgementWait(context)
    while True:
        context.refresh()
        if context.state.acknowledged_partition == context.run.new_partition:
            return f"acknowledged at {context.state.acknowledged_at:%Y-%m-%d %H:%M:%S}"
        if context.options.terminate_at_acknowledgement:
            context.repo.compaction.update_run(context.run.id, status=WAITING)
            return TERMINATED
        try:
            extraction = run_extraction(
                context.settings,
                context.options.table,
                progress=context.progress,
                stopping=context.stopping,
            )
        except LockHeldError:
            wait.running_extraction()
            continue
        context.changes_shipped += extraction.rows_read
        context.refresh()
        if context.state.acknowledged_partition != context.run.new_partition:
            raise StateError(
                f"the extraction this compaction ran did not acknowledge change ingestion "
                f"diversion to control partition {context.run.new_partition}"
            )
        if not extraction.acknowledged:  # one that ended just before this one started did
            return f"acknowledged at {context.state.acknowledged_at:%Y-%m-%d %H:%M:%S}"
        return (
            f"acknowledged by this compaction's extraction ({extraction.rows_read} changes to "
            f"control partition {extraction.control_partition}) at "
            f"{context.state.acknowledged_at:%Y-%m-%d %H:%M:%S}"
        )


class _AcknowledgementWait:
    """Waiting for a running extraction: reported on the terminal, bounded when asked."""

    def __init__(self, context: CompactionContext) -> None:
        self.context = context
        self.started = time.monotonic()
        self.next_report = self.started

    def running_extraction(self) -> None:
        """Sleep one poll interval (after reporting, when due).

        Raises:
            AcknowledgementTimeoutError: the wait reached ``--incremental-acknowledgement-timeout``.
        """
        context = self.context
        waited = time.monotonic() - self.started
        holder = locks.holder(context.repo, context.record.table_key, locks.EXTRACTION)
        what = (
            f"the running {locks.describe(holder)}"
            if holder is not None
            else "a running extraction"
        )
        partition = context.run.new_partition
        limit = context.options.acknowledgement_timeout_seconds
        if limit is not None and waited >= limit:
            raise AcknowledgementTimeoutError(
                f"gave up after {_duration(waited)} (--incremental-acknowledgement-timeout="
                f"{limit:g}) waiting for {what} of {context.record.table_key} to acknowledge "
                f"change ingestion diversion to control partition {partition}"
            )
        if time.monotonic() >= self.next_report:
            message = (
                f"waiting for {what} of {context.record.table_key} to acknowledge change "
                f"ingestion diversion to control partition {partition}: "
                f"{_duration(waited)} so far"
                + (f", giving up after {_duration(limit)}" if limit is not None else "")
            )
            log.warning("%s", message)
            context.report_waiting(message)
            self.next_report = time.monotonic() + WAIT_REPORT_SECONDS
        pause = context.options.ack_poll_seconds
        if limit is not None:
            pause = max(0.0, min(pause, limit - waited))
        context.pause(pause)


WAIT_REPORT_SECONDS = 60.0
"""How often a compaction waiting for a running extraction says so again."""


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m {rest:02d}s" if minutes else f"{rest}s"


def record_snapshot(context: CompactionContext) -> str:
    """Record the Delta versions before any destructive step. Re-run: keeps the first record."""
    if context.run.snapshot is not None:
        return "already recorded"
    try:
        snapshot = {
            "base": _version(context.record.base_table, context.record.base_path),
            "delta": _version(context.state.delta_table, context.state.delta_path),
        }
    except Exception as exc:
        if not context.options.without_snapshot:
            raise LakeError(
                f"cannot record the pre-compaction snapshot ({exc}); add "
                "--incremental-run-compaction-without-snapshot to compact without one"
            ) from exc
        log.warning("compacting without a pre-compaction snapshot: %s", exc)
        return "skipped (--incremental-run-compaction-without-snapshot)"
    context.repo.compaction.update_run(context.run.id, snapshot=snapshot)
    context.refresh()
    return (
        f"base version {snapshot['base']['version']}, delta version {snapshot['delta']['version']}"
    )


def _version(name: str, location: str) -> dict[str, object]:
    fault_raise("compact.snapshot_unavailable")
    version = storage.delta_version(location)
    if version is None:
        raise LakeError(f"no Delta table at {location}")
    return {"table": name, "path": location, "version": version}


def compact(context: CompactionContext) -> str:
    """Merge the static control partition(s) into the base. Re-run: rewrites the same rows."""
    method = CompactionMethod(context.run.method)
    return REWRITES[method](context)


def wait_for_queries(context: CompactionContext) -> str:
    """Let queries that started before the switch finish. Re-run: waits the rest."""
    minutes = float(context.options.wait_minutes)
    if minutes <= 0:
        return "no wait"
    _wait_since_switch(context)
    return f"waited {minutes:g} minutes after the switch"


def _wait_since_switch(context: CompactionContext) -> None:
    """Sleep until ``--incremental-wait-time`` has passed since the views switched.

    Queries that started before the switch still read the old objects; they are dropped
    only once this has returned. The switch time is persisted, so a resumed run waits only
    the rest.
    """
    minutes = float(context.options.wait_minutes)
    if minutes <= 0:
        return
    if "switched_at" not in context.run.progress:
        # A run switched by an older gluon (which waited before the switch): count from now.
        context.save_progress(switched_at=time.time())
    remaining = float(context.run.progress["switched_at"]) + minutes * 60 - time.time()
    if remaining > 0:
        # Never hold a lake session across a wait: the engine ends idle sessions.
        context.release_session()
        log.info("waiting %.0f seconds for queries to finish", remaining)
        context.pause(remaining)


def switch_views(context: CompactionContext) -> str:
    """Point the views at the compacted base and the newer partitions. Re-run: no change."""
    if context.run.new_partition is None:
        raise StateError(f"compaction run {context.run.id} has no new control partition recorded")
    if context.state.view_min_partition == context.run.new_partition:
        if "switched_at" not in context.run.progress:  # killed between the switch and its record
            context.save_progress(switched_at=time.time())
        return "already switched"
    # A run an older gluon started wrote a new base folder (``..._cNN``): switch to it.
    new_base = context.run.progress.get("new_base_path")
    staged = context.run.progress.get("staged_base")
    if staged:
        # The one path: the stage becomes the base's next Delta version in one commit, just
        # before the views stop merging the compacted changes (merging them again over the
        # compacted base changes nothing; docs/architecture.md, *One base path for life*).
        stable = stable_base_path(context.record.base_path)
        version = publish.publish(stable, str(staged), context.run.id)
        context.save_progress(published_version=version)
        fault_point("compact.after_publish")
        new_base = stable if stable != context.record.base_path else None
    context.save_progress(old_base_path=context.record.base_path)
    context.repo.switch_generation(
        context.record.table_key,
        base_path=new_base,
        view_generation=context.state.view_generation + 1,
        view_min_partition=context.run.new_partition,
    )
    context.save_progress(switched_at=time.time())
    return f"views now at generation {context.state.view_generation}"


def drop_obsolete(context: CompactionContext) -> str:
    """Drop the compacted control partitions and an old base table. Re-run: drops nothing new."""
    _wait_since_switch(context)  # no-op once wait_for_queries has waited
    retain = context.options.retain_obsolete_objects
    dropped = []
    old_base = context.run.progress.get("old_base_path")
    if old_base and old_base != context.record.base_path:
        if retain:
            # A name `gluon query` registers (gluon.read.catalog): the base as it was before run N.
            name = retained_base_table(context.record.base_table, context.run.id)
            context.record_retained("base table", name, old_base)
        elif storage.remove_table(old_base):
            dropped.append(f"old base {old_base}")
    published = context.run.progress.get("published_version")
    # Version 0: a base that came back to its first path (nothing was there before).
    if (
        retain
        and published is not None
        and int(published) > 0
        and old_base == context.record.base_path
    ):
        # The base kept its path: what is retained is its version before the publish, which
        # the base's vacuum keeps (gluon.compact.steps.vacuum) and `gluon query` registers.
        name = retained_base_table(context.record.base_table, context.run.id)
        context.record_retained(
            "base table version", name, context.record.base_path, version=int(published) - 1
        )
    for stage in staged_tables(context):
        if storage.remove_table(stage):
            dropped.append(f"staging table {stage}")
    for published_stage in ("staged_base", "staged_partitions"):
        if context.run.progress.get(published_stage):
            # Its data files are now the base table's; only the stage's own log goes.
            publish.remove_stage_log(str(context.run.progress[published_stage]))
    if retain:
        # Copied to a Delta table of their own before the delete below: queryable by name,
        # and it outlives the delta table (which disable drops). Copied once: a re-run after
        # the delete must not overwrite the copy with nothing.
        name, location = retained_changes_table(context)
        if "retained_changes" not in context.run.progress:
            compacted = sql.select_all(
                sql.quote(context.state.delta_table), sql.up_to_partition(context.max_partition)
            )
            context.lake().write(
                context.lake().sql(compacted),
                location,
                mode="overwrite",
                partition_by=[PARTITION_COLUMN],
            )
            context.save_progress(retained_changes=location)
        context.record_retained("control partitions", name, location)
    drop_control_partitions(context.state.delta_path, context.max_partition)
    dropped.append(f"control partitions <= {context.max_partition}")
    return "dropped " + ", ".join(dropped)


def vacuum(context: CompactionContext) -> str:
    """Remove Delta files older than the retention. Re-run: removes what is left."""
    hours = context.options.vacuum_retention_hours
    kept = retained_versions(context)
    removed = storage.vacuum(context.record.base_path, retention_hours=hours, keep_versions=kept)
    removed += storage.vacuum(context.state.delta_path, retention_hours=hours)
    keeping = f", keeping retained base versions {', '.join(map(str, kept))}" if kept else ""
    return f"removed {removed} files older than {hours:g} hours{keeping}"


def retained_versions(context: CompactionContext) -> list[int]:
    """Versions of the base table recorded as retained (their files must outlive vacuum)."""
    return retained_base_versions(context.repo, context.record.table_key, context.record.base_path)


def retained_base_versions(repo: Repository, table_key: str, base_path: str) -> list[int]:
    """Versions of the Delta table at ``base_path`` recorded as retained for ``table_key``
    (a vacuum of the base, DEFERRED or IMMEDIATE, keeps their files)."""
    return sorted(
        {
            item.delta_version
            for item in repo.compaction.retained(table_key)
            if item.delta_version is not None
            and item.location is not None
            and tables.same_location(item.location, base_path)
        }
    )


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    run: Callable[[CompactionContext], str]


STEPS: tuple[Step, ...] = (
    Step("request_diversion", request_diversion),
    Step("await_acknowledgement", await_acknowledgement),
    Step("record_snapshot", record_snapshot),
    Step("compact", compact),
    # The wait follows the switch: queries started before it read the old base and control
    # partitions, which drop_obsolete removes only once the wait time has passed.
    Step("switch_views", switch_views),
    Step("wait_for_queries", wait_for_queries),
    Step("drop_obsolete", drop_obsolete),
    Step("vacuum", vacuum),
)
