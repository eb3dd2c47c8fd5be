"""The report's file formats: JSON, CSV, HTML (Jinja, self-contained) and text."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

from gluon import templates
from gluon.status import report_text
from gluon.status.charts import BarChart, bar_chart
from gluon.status.formatting import count, duration, failure_line, iso, jsonable, size, when
from gluon.status.model import OutputFormat, OutputLevel, Report, TableReport
from gluon.status.text import (
    backlog_line,
    last_latency,
    oldest_pending,
    run_label,
    staging_rows,
    verified_text,
    wal_retained,
)

Getter = Callable[[TableReport], Any]


def _method(table: TableReport) -> str:
    status = table.status
    if status.extraction is None:
        return "not enabled"
    return status.extraction.method + ("" if status.incremental_enabled else " (incomplete)")


def _last_compaction(table: TableReport) -> str | None:
    compaction = table.status.compaction
    last = compaction.last_completed if compaction else None
    return iso(last.run.finished_at) if last else None


def _partitions(table: TableReport) -> str:
    ingestion = table.status.ingestion
    if ingestion is None:
        return ""
    return ";".join(f"{part.partition}={part.rows}" for part in ingestion.partitions)


def _snapshot(table: TableReport) -> str:
    compaction = table.status.compaction
    snapshot = compaction.snapshot if compaction else None
    if snapshot is None:
        return ""
    return ";".join(f"{entry.role}={entry.path}@{entry.version}" for entry in snapshot.entries)


def _source_objects(table: TableReport) -> str:
    return ";".join(
        f"{item.role}|{item.object_type}|{item.name}" for item in table.status.source_objects
    )


def _slot_figure(table: TableReport, name: str) -> int | None:
    """A figure of a PG_LOGICAL table's replication slot (None: no slot, or unknown)."""
    backlog = table.status.changelog
    slot = backlog.slot if backlog else None
    return None if slot is None else getattr(slot, name)


COLUMNS: dict[str, Getter] = {
    "table": lambda t: t.status.table_key,
    "source_dialect": lambda t: t.status.offload.source_dialect,
    "source_table": lambda t: t.status.offload.source_table,
    "user_view": lambda t: t.status.offload.user_view,
    "offload_type": lambda t: t.status.offload.offload_type,
    "extraction_method": _method,
    "merge_mode": lambda t: t.status.extraction.merge_mode if t.status.extraction else None,
    "base_rows": lambda t: t.status.offload.base.stats.rows,
    "base_files": lambda t: t.status.offload.base.stats.files,
    "base_bytes": lambda t: t.status.offload.base.stats.size_bytes,
    "delta_rows": lambda t: t.status.ingestion.live_rows if t.status.ingestion else None,
    "delta_files": lambda t: t.status.ingestion.delta.stats.files if t.status.ingestion else None,
    "delta_bytes": lambda t: (
        t.status.ingestion.delta.stats.size_bytes if t.status.ingestion else None
    ),
    "changelog_rows": lambda t: t.status.changelog.rows if t.status.changelog else None,
    "oldest_pending_age_seconds": lambda t: (
        t.status.lag.oldest_pending_age_seconds if t.status.lag else None
    ),
    "oldest_pending_at": lambda t: iso(t.status.lag.oldest_pending_at) if t.status.lag else None,
    "last_latency_seconds": lambda t: t.status.lag.last_latency_seconds if t.status.lag else None,
    "wal_retained_bytes": lambda t: _slot_figure(t, "retained_bytes"),
    "wal_unconfirmed_bytes": lambda t: _slot_figure(t, "unconfirmed_bytes"),
    "last_extraction_at": lambda t: (
        iso(t.status.extraction.last_extraction_at) if t.status.extraction else None
    ),
    "extraction_runs": lambda t: t.status.extraction.runs if t.status.extraction else None,
    "failed_extractions": lambda t: t.status.extraction.failed if t.status.extraction else None,
    "changes_shipped": lambda t: (
        t.status.extraction.changes_extracted if t.status.extraction else None
    ),
    "last_extraction_run": lambda t: (
        t.status.extraction.last_run.id
        if t.status.extraction and t.status.extraction.last_run
        else None
    ),
    "last_compaction_at": _last_compaction,
    "compactions": lambda t: t.status.compaction.completed_runs if t.status.compaction else None,
    "last_compaction_run": lambda t: (
        t.status.compaction.last_completed.run.id
        if t.status.compaction and t.status.compaction.last_completed
        else None
    ),
    "compaction_in_progress": report_text.ongoing_compaction,
    # The latest gluon verify: a summary column, since it is what the report is read for.
    "verified": lambda t: verified_text(t.status.verified) if t.status.verified else "never",
    "attention": lambda t: len(t.findings),
    # detail only from here
    "offloaded_at": lambda t: iso(t.status.offload.offloaded_at),
    "rows_offloaded": lambda t: t.status.offload.rows_offloaded,
    "offloaded_partitions": lambda t: ";".join(t.status.offload.offloaded_partitions),
    "offloaded_subpartitions": lambda t: ";".join(t.status.offload.offloaded_subpartitions),
    "key_columns": lambda t: ";".join(t.status.objects.key_columns) if t.status.objects else "",
    "max_change_position": lambda t: (
        t.status.extraction.max_position if t.status.extraction else None
    ),
    "control_partitions": _partitions,
    "internal_view": lambda t: (t.status.objects.internal_view or "") if t.status.objects else "",
    "delta_table": lambda t: t.status.objects.delta_table if t.status.objects else "",
    "delta_path": lambda t: t.status.objects.delta_path if t.status.objects else "",
    "base_table": lambda t: t.status.offload.base.name,
    "base_path": lambda t: t.status.offload.base.stats.location,
    "source_objects": _source_objects,
    "snapshot": _snapshot,
    "retained_objects": lambda t: len(t.status.compaction.retained) if t.status.compaction else 0,
    "changes_set_aside": lambda t: t.status.set_aside.count if t.status.set_aside else 0,
    "attention_messages": lambda t: ";".join(
        f"{finding.severity}: {finding.message}" for finding in t.findings
    ),
}
"""Flat columns (CSV, the summary table); a summary uses those up to ``attention``."""

SUMMARY_COLUMNS = tuple(list(COLUMNS)[: list(COLUMNS).index("attention") + 1])
LEVEL_COLUMNS: dict[OutputLevel, tuple[str, ...]] = {
    OutputLevel.SUMMARY: SUMMARY_COLUMNS,
    OutputLevel.DETAIL: tuple(COLUMNS),
}


def flat_row(table: TableReport, level: OutputLevel) -> dict[str, Any]:
    return {name: COLUMNS[name](table) for name in LEVEL_COLUMNS[level]}


def _meta(report: Report) -> dict[str, Any]:
    return {
        "generated_at": iso(report.generated_at),
        "gluon_version": report.gluon_version,
        "level": report.level.value,
        "schema_filter": report.schema_filter,
        "table_filter": report.table_filter,
        "thresholds": jsonable(report.thresholds),
        "table_count": len(report.tables),
        "attention_count": len(report.findings),
    }


def to_json(report: Report) -> str:
    """One JSON object: the report's settings, one entry per table, and every finding."""
    tables = []
    for table in report.tables:
        entry = flat_row(table, OutputLevel.SUMMARY)
        entry["findings"] = jsonable(table.findings)
        if report.level is OutputLevel.DETAIL:
            entry["status"] = jsonable(table.status)
        tables.append(entry)
    document = {**_meta(report), "tables": tables, "findings": jsonable(report.findings)}
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def to_csv(report: Report) -> str:
    """One row per table with a header row (more columns at the detail level)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = LEVEL_COLUMNS[report.level]
    writer.writerow(columns)
    for table in report.tables:
        row = flat_row(table, report.level)
        writer.writerow([csv_value(row[name]) for name in columns])
    return buffer.getvalue()


def csv_value(value: Any) -> Any:
    """A CSV cell: empty for NULL, ``true``/``false`` for a boolean (as JSON and Spark write
    them; Python's ``True`` is no CSV convention)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value


def _charts(table: TableReport) -> list[BarChart]:
    status = table.status
    if status.extraction is None:
        return []
    runs = bar_chart(
        "Changes per extraction run (oldest to newest)",
        [
            (
                str(run.id),
                run.rows_read or 0,
                f"{run_label(run)} {run.status}, {when(run.started_at)}: "
                f"{count(run.rows_read or 0)} changes",
            )
            for run in reversed(status.extraction.recent_runs)
        ],
        empty_text="no extraction has run yet",
    )
    if status.ingestion is None:  # merge mode IMMEDIATE: no control partitions
        return [runs]
    partitions = bar_chart(
        "Changes per control partition",
        [
            (
                str(part.partition),
                part.rows,
                f"control partition {part.partition}: {count(part.rows)} changes ({part.role})",
            )
            for part in status.ingestion.partitions
        ],
        empty_text="no control partitions yet",
    )
    return [partitions, runs]


def _html_row(table: TableReport) -> dict[str, Any]:
    """A summary row with times for people instead of ISO 8601."""
    status = table.status
    extraction, compaction = status.extraction, status.compaction
    last = compaction.last_completed if compaction else None
    return {
        **flat_row(table, OutputLevel.SUMMARY),
        "last_extraction_at": when(extraction.last_extraction_at) if extraction else "-",
        "last_compaction_at": when(last.run.finished_at if last else None) if compaction else "-",
        "changelog_text": "-"
        if status.changelog is None
        else count(status.changelog.rows, "unknown"),
        "pending_text": report_text.pending_age(status.lag),
        "latency_text": duration(status.lag.last_latency_seconds) if status.lag else "-",
        "verified_text": report_text.verified_short(status.verified),
    }


def to_html(report: Report) -> str:
    """One self-contained HTML page (inline CSS, JS and SVG; nothing fetched)."""
    return templates.render(
        "report",
        "report",
        report=report,
        detail=report.level is OutputLevel.DETAIL,
        rows=[_html_row(table) for table in report.tables],
        charts={table.status.table_key: _charts(table) for table in report.tables},
        thresholds=report_text.threshold_texts(report.thresholds),
        staging_rows=staging_rows,
        failure_line=failure_line,
        when=when,
        size=size,
        oldest_pending=oldest_pending,
        last_latency=last_latency,
        backlog_line=backlog_line,
        wal_retained=wal_retained,
        count=count,
        anchor=lambda key: "table-" + "".join(c if c.isalnum() else "-" for c in key.lower()),
    )


WRITERS: dict[OutputFormat, Callable[[Report], str]] = {
    OutputFormat.TEXT: report_text.render_report,
    OutputFormat.HTML: to_html,
    OutputFormat.JSON: to_json,
    OutputFormat.CSV: to_csv,
}
