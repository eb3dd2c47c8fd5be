"""Which tables need an operator: the report's "needs attention" rules.

Each rule looks at one table's status and returns findings; ``RULES`` is the
list the report applies, in order.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from gluon.extract.schema_changes import unfilled_message
from gluon.locks import INTERRUPTED
from gluon.repo.compaction import FAILED, RUNNING, WAITING, CompactionRun
from gluon.repo.incremental import (
    EXTRACTION_FAILED,
    EXTRACTION_INTERRUPTED,
    EXTRACTION_RUNNING,
)
from gluon.status.formatting import count, duration, failure_line, size, when
from gluon.status.model import Finding, TableStatus, Thresholds
from gluon.status.text import (
    nullable_key_message,
    run_label,
    set_aside_summary,
    wal_over_threshold,
    wal_way_out,
)

ERROR = "error"
WARNING = "warning"

Rule = Callable[[TableStatus, Thresholds, dt.datetime], list[Finding]]


def _minutes(since: dt.datetime, at: dt.datetime) -> float:
    """Minutes from ``since`` to ``at`` (both naive UTC)."""
    return (at - since).total_seconds() / 60


def _changelog_backlog(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    rows = status.changelog.rows if status.changelog else None
    if rows is None or rows <= limits.backlog_rows:
        return []
    message = (
        f"{count(rows)} changes wait in the changelog (threshold {count(limits.backlog_rows)}):"
        " run extractions more often"
    )
    return [Finding(status.table_key, WARNING, "changelog_backlog", message)]


def _lagging(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    lag = status.lag
    age = lag.oldest_pending_age_seconds if lag else None
    if age is None or age <= limits.lag_minutes * 60:
        return []
    message = (
        f"the oldest change not in the lake was captured {duration(age)} ago (threshold "
        f"{limits.lag_minutes:g} minutes): check that extractions run and succeed"
    )
    return [Finding(status.table_key, WARNING, "lag", message)]


def _wal_retained(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    slot = status.changelog.slot if status.changelog else None
    if slot is None or not wal_over_threshold(slot, limits.wal_retained_mb):
        return []
    message = (
        f"replication slot {slot.slot} makes the source keep {size(slot.retained_bytes or 0)} "
        f"of WAL (threshold {limits.wal_retained_mb:g} MiB): {wal_way_out(slot)}, before the "
        "source's disk fills"
    )
    return [Finding(status.table_key, WARNING, "wal_retained", message)]


def _capture_broken(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    problems = status.changelog.capture_problems if status.changelog else ()
    return [Finding(status.table_key, ERROR, "capture_broken", problem) for problem in problems]


def _delta_backlog(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    if status.ingestion is None:
        return []
    if status.extraction is not None and status.extraction.merge_mode == "IMMEDIATE":
        return []  # the staging table holds the last batch, already merged: nothing to compact
    live = status.ingestion.live_rows
    if live <= limits.backlog_rows:
        return []
    message = (
        f"{count(live)} changes in the delta table (threshold {count(limits.backlog_rows)}):"
        " run a compaction"
    )
    return [Finding(status.table_key, WARNING, "delta_backlog", message)]


def _ongoing(status: TableStatus) -> CompactionRun | None:
    ongoing = status.compaction.ongoing if status.compaction else None
    return ongoing.run if ongoing else None


def _compaction_waiting(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    ongoing = _ongoing(status)
    if ongoing is None or ongoing.status not in (WAITING, RUNNING):
        return []
    since = ongoing.started_at
    if ongoing.status == WAITING and status.ingestion is not None:
        since = status.ingestion.requested.at or since
    minutes = _minutes(since, at)
    if minutes <= limits.wait_minutes:
        return []
    if ongoing.status == WAITING:
        message = (
            f"compaction run {ongoing.id} has waited for acknowledgement since {when(since)}: "
            "run an extraction, then the compaction command again"
        )
    else:
        message = (
            f"compaction run {ongoing.id} has been at step {ongoing.current_step} since "
            f"{when(since)}: if no compaction process is alive it was interrupted; run the "
            "compaction command again to resume it"
        )
    return [Finding(status.table_key, WARNING, "compaction_waiting", message)]


def _compaction_failed(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    ongoing = _ongoing(status)
    if ongoing is None or ongoing.status != FAILED:
        return []
    reason = f": {failure_line(ongoing.message)}" if ongoing.message else ""
    message = (
        f"compaction run {ongoing.id} failed at step {ongoing.current_step}{reason}; "
        "run the same compaction command again to resume it"
    )
    return [Finding(status.table_key, ERROR, "compaction_failed", message)]


def _compaction_interrupted(
    status: TableStatus, limits: Thresholds, at: dt.datetime
) -> list[Finding]:
    ongoing = _ongoing(status)
    if ongoing is None or ongoing.status != INTERRUPTED:
        return []
    message = (
        f"compaction run {ongoing.id} was interrupted at step {ongoing.current_step} (no "
        "process holds the table's lock): run the same compaction command again to resume it"
    )
    return [Finding(status.table_key, WARNING, "compaction_interrupted", message)]


def _extraction_failed(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    last = status.extraction.last_run if status.extraction else None
    if last is None or last.status != EXTRACTION_FAILED:
        return []
    reason = f": {failure_line(last.message)}" if last.message else ""
    message = f"the last extraction ({run_label(last)}, {when(last.started_at)}) failed{reason}"
    return [Finding(status.table_key, ERROR, "extraction_failed", message)]


def _extraction_interrupted(
    status: TableStatus, limits: Thresholds, at: dt.datetime
) -> list[Finding]:
    if status.extraction is None:
        return []
    found = []
    last = status.extraction.last_run
    if last is not None and last.status == EXTRACTION_RUNNING:
        minutes = _minutes(last.started_at, at)
        if minutes > limits.wait_minutes:
            message = (
                f"{run_label(last)} has been "
                f"running since {when(last.started_at)}: "
                "if no extraction process is alive it was interrupted (the next extraction "
                "repairs it)"
            )
            found.append(Finding(status.table_key, WARNING, "extraction_running", message))
    recent = status.extraction.recent_runs
    interrupted = [run for run in recent if run.status == EXTRACTION_INTERRUPTED]
    if interrupted:
        ids = ", ".join(run_label(run) for run in interrupted)
        message = (
            f"recent extraction runs were interrupted ({ids}; killed or crashed, the "
            "following run repaired them): check their log files"
        )
        found.append(Finding(status.table_key, WARNING, "extraction_interrupted", message))
    return found


def _half_enabled(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    if status.incremental_state is None or status.incremental_enabled:
        return []
    return [
        Finding(status.table_key, ERROR, "incomplete_state", status.message or "incomplete state")
    ]


def _schema_drift(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    drift = status.schema_drift
    if drift is None:
        return []
    if drift.refused:
        message = (
            f"the source table changed in a way the lake cannot follow ({drift.summary}): "
            "extractions stop until the column is restored or the lake copy is rebuilt"
        )
        return [Finding(status.table_key, ERROR, "schema_refused", message)]
    message = f"the source table changed ({drift.summary}): the next extraction carries it"
    return [Finding(status.table_key, WARNING, "schema_changed", message)]


def _unfilled_columns(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    if not status.unfilled_columns:
        return []
    message = unfilled_message(status.unfilled_columns)
    return [Finding(status.table_key, WARNING, "unfilled_default", message)]


def _nullable_key(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    if not status.nullable_keys:
        return []
    message = nullable_key_message(status.nullable_keys)
    return [Finding(status.table_key, WARNING, "nullable_key", message)]


def _insert_only(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    """Changes an insert-only table did not apply, or an in-place compaction showing duplicates."""
    return [Finding(status.table_key, ERROR, "insert_only", note) for note in status.attention]


def _source_truncated(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    """The source holds fewer rows than the lake shows, and its capture sees no TRUNCATE."""
    if status.truncation is None:
        return []
    return [Finding(status.table_key, ERROR, "source_truncated", status.truncation)]


def _set_aside(status: TableStatus, limits: Thresholds, at: dt.datetime) -> list[Finding]:
    """Changes moved out of the changelog on the user's command: never silent."""
    if status.set_aside is None:
        return []
    return [
        Finding(status.table_key, WARNING, "changes_set_aside", set_aside_summary(status.set_aside))
    ]


RULES: tuple[Rule, ...] = (
    _half_enabled,
    _capture_broken,
    _source_truncated,
    _insert_only,
    _nullable_key,
    _set_aside,
    _extraction_failed,
    _compaction_failed,
    _compaction_interrupted,
    _compaction_waiting,
    _extraction_interrupted,
    _changelog_backlog,
    _lagging,
    _wal_retained,
    _delta_backlog,
    _schema_drift,
    _unfilled_columns,
)


def findings(status: TableStatus, limits: Thresholds, at: dt.datetime) -> tuple[Finding, ...]:
    """Everything about ``status`` that needs an operator, errors first."""
    found = [finding for rule in RULES for finding in rule(status, limits, at)]
    return tuple(sorted(found, key=lambda finding: finding.severity != ERROR))
