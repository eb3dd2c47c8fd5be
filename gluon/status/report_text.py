"""The text form of the offload status report (fixed-width tables, one section per table)."""

from __future__ import annotations

from collections.abc import Sequence

from gluon.repo.verify_runs import VerifyRun
from gluon.states import MergeMode
from gluon.status.compaction_text import compaction_label
from gluon.status.formatting import count, duration, failure_line, size, when
from gluon.status.lag import TableLag
from gluon.status.model import OutputLevel, Report, TableReport, Thresholds
from gluon.status.text import (
    aligned,
    backlog_line,
    last_latency,
    named_parts,
    offloaded,
    oldest_pending,
    run_counts,
    wal_retained,
)

INDENT = "    "


def heading(title: str) -> list[str]:
    return [title, "-" * len(title), ""]


def grid(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """A fixed-width table: headers, a dashed rule, then the rows (indented)."""
    cells = [[str(value) for value in row] for row in rows]
    widths = [
        max([len(header), *(len(row[index]) for row in cells)])
        for index, header in enumerate(headers)
    ]

    def line(values: Sequence[str]) -> str:
        return (
            INDENT + " ".join(f"{v:<{w}}" for v, w in zip(values, widths, strict=True))
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths]), *(line(row) for row in cells), ""]


def threshold_texts(thresholds: Thresholds) -> list[str]:
    """Every threshold the report flags tables by, for its header (text and HTML alike)."""
    return [
        f"backlog {count(thresholds.backlog_rows)} changes",
        f"waiting {thresholds.wait_minutes:g} minutes",
        f"oldest pending change {thresholds.lag_minutes:g} minutes",
        f"WAL retained by a slot {thresholds.wal_retained_mb:g} MiB",
    ]


def render_report(report: Report) -> str:
    """The whole report as text."""
    filters = ", ".join(
        f"{name}={value}"
        for name, value in (("schema", report.schema_filter), ("table", report.table_filter))
        if value
    )
    lines = [
        f"gluon Offload Status Report v{report.gluon_version}",
        f"Generated:   {when(report.generated_at)}",
        f"Level:       {report.level.value}",
        f"Tables:      {len(report.tables)}" + (f" ({filters})" if filters else ""),
        "Thresholds:  " + ", ".join(threshold_texts(report.thresholds)),
        "",
        *heading("Summary"),
    ]
    if not report.tables:
        lines += [INDENT + "No offloaded tables.", ""]
    else:
        lines += grid(
            (
                "Table",
                "Method",
                "Merge mode",
                "Base rows",
                "Delta rows",
                "Changelog",
                "Oldest pending",
                "Latency",
                "Last extraction",
                "Last compaction",
                "Ongoing compaction",
                "Attention",
                "Verified",
            ),
            [_summary(table) for table in report.tables],
        )
    lines += heading("Needs Attention")
    if report.findings:
        lines += grid(
            ("Table", "Severity", "Finding"),
            [(f.table_key, f.severity, f.message) for f in report.findings],
        )
    else:
        lines += [INDENT + "Nothing needs attention.", ""]
    if report.level is OutputLevel.DETAIL:
        for table in report.tables:
            lines += _detail(table, report.thresholds.wal_retained_mb)
    return "\n".join(lines).rstrip() + "\n"


def _summary(table: TableReport) -> tuple[str, ...]:
    status = table.status
    extraction = status.extraction
    compaction = status.compaction
    ingestion = status.ingestion
    delta = ingestion.live_rows if ingestion else None
    changelog = status.changelog
    return (
        status.table_key,
        extraction.method if extraction else "not enabled",
        extraction.merge_mode if extraction else "-",
        count(status.offload.base.stats.rows),
        count(delta, "-"),
        count(changelog.rows, "unknown" if changelog else "-") if changelog else "-",
        pending_age(status.lag),
        duration(status.lag.last_latency_seconds) if status.lag else "-",
        when(extraction.last_extraction_at, "never") if extraction else "-",
        when(compaction.last_completed.run.finished_at, "-")
        if compaction and compaction.last_completed
        else ("never" if compaction else "-"),
        ongoing_compaction(table) or "-",
        str(len(table.findings)),
        verified_short(status.verified),
    )


def verified_short(run: VerifyRun | None) -> str:
    """The latest ``gluon verify`` in a summary cell: when, and equal or how many differ."""
    if run is None:
        return "never"
    found = "equal" if run.differences == 0 else f"{count(run.differences)} differences"
    return f"{when(run.verified_at)}, {found}"


def pending_age(lag: TableLag | None) -> str:
    """The oldest pending change's age, ``none`` when nothing waits, or ``unknown``."""
    if lag is None:
        return "-"
    if lag.oldest_pending_age_seconds is not None and lag.oldest_pending_at is None:
        return "none"
    return duration(lag.oldest_pending_age_seconds)


def ongoing_compaction(table: TableReport) -> str:
    """``run 3 at await_acknowledgement: waiting for acknowledgement`` ("" when none)."""
    compaction = table.status.compaction
    ongoing = compaction.ongoing if compaction else None
    if ongoing is None:
        return ""
    step = f" at {ongoing.run.current_step}" if ongoing.run.current_step else ""
    return f"{compaction_label(ongoing.run)}{step}: {ongoing.status_text}"


def _detail(table: TableReport, wal_threshold_mb: float) -> list[str]:
    status = table.status
    slot = status.changelog.slot if status.changelog else None
    title = f"Table {status.table_key}"
    lines = ["=" * len(title), title, "=" * len(title), ""]
    offload = status.offload
    lines += heading("Offload")
    lines += [
        INDENT + line
        for line in aligned(
            [
                ("Source table", f"{offload.source_table} ({offload.source_dialect})"),
                ("Lake user view", offload.user_view),
                ("Offload type", offload.offload_type),
                ("Offloaded at", offloaded(offload)),
                *named_parts(offload),
                (
                    "Incremental update",
                    status.extraction.method if status.extraction else "not enabled",
                ),
                *([("Merge mode", status.extraction.merge_mode)] if status.extraction else []),
                *([("Note", status.message)] if status.message else []),
            ]
        )
    ]
    lines.append("")
    if status.source_objects:
        lines += heading("Incremental Update Objects (RDBMS)")
        lines += grid(
            ("Incremental Update Object Type", "Object Type", "Object Name"),
            [(item.role, item.object_type, item.name) for item in status.source_objects],
        )
    lines += heading("Incremental Update Objects (Offloaded)" if status.objects else "Lake Objects")
    lines += grid(
        ("Incremental Update Object Type", "Object Type", "Object Name"),
        [(item.role, item.object_type, item.name) for item in status.lake_objects],
    )
    stored = [
        offload.base,
        *([status.ingestion.delta] if status.ingestion else []),
        *([status.staging] if status.staging else []),
    ]
    lines += heading("Lake Storage")
    lines += grid(
        ("Delta table", "Rows", "Files", "Size", "Version", "Last commit", "Location"),
        [
            (
                item.name,
                count(stats.rows) if stats.exists else "-",
                stats.files,
                size(stats.size_bytes),
                stats.version if stats.version is not None else "-",
                when(stats.committed_at, "-"),
                stats.location + (f" ({stats.error})" if stats.error else ""),
            )
            for item in stored
            for stats in [item.stats]
        ],
    )
    if status.ingestion is not None:
        lines += heading("Changes Per Control Partition")
        lines += grid(
            ("Partition", "Changes", "Files", "Size", "Role"),
            [
                (part.partition, count(part.rows), part.files, size(part.size_bytes), part.role)
                for part in status.ingestion.partitions
            ],
        )
    if status.extraction is not None:
        extraction = status.extraction
        lines += heading("Extraction History (newest first)")
        lines += [
            INDENT + line
            for line in aligned(
                [
                    (
                        f"Max change {extraction.position_kind} extracted",
                        count(extraction.max_position, "none yet"),
                    ),
                    _backlog_line(table),
                    *(
                        [
                            (
                                "WAL retained by the slot",
                                wal_retained(slot, wal_threshold_mb),
                            )
                        ]
                        if slot
                        else []
                    ),
                    ("Oldest change not in the lake", oldest_pending(status.lag)),
                    ("Last source-to-lake latency", last_latency(status.lag)),
                    (
                        "Runs",
                        f"{run_counts(extraction)}; "
                        f"{count(extraction.changes_extracted)} changes shipped",
                    ),
                ]
            )
        ]
        lines.append("")
        if extraction.recent_runs:
            immediate = extraction.merge_mode == MergeMode.IMMEDIATE
            lines += grid(
                (
                    "Extraction run",
                    "Status",
                    "Started",
                    "Finished",
                    "Changes",
                    "Written",
                    "Partition",
                    "Message",
                ),
                [
                    (
                        run.id,
                        run.status,
                        when(run.started_at),
                        when(run.finished_at, "-"),
                        count(run.rows_read, "-"),
                        count(run.rows_written, "-"),
                        "-"
                        if immediate or run.control_partition is None
                        else run.control_partition,
                        failure_line(run.message),
                    )
                    for run in extraction.recent_runs
                ],
            )
    if status.compaction is not None:
        lines += _compaction(table)
    if table.findings:
        lines += heading("Needs Attention")
        lines += [INDENT + f"{f.severity}: {f.message}" for f in table.findings] + [""]
    return lines


def _backlog_line(table: TableReport) -> tuple[str, str]:
    backlog = table.status.changelog
    if backlog is not None and backlog.slot is not None:
        return backlog_line(backlog)
    return "Changes waiting in the changelog", _backlog(table)


def _backlog(table: TableReport) -> str:
    backlog = table.status.changelog
    if backlog is None:
        return "-"
    if backlog.rows is None:
        return f"unknown ({backlog.reason})"
    return count(backlog.rows)


def _compaction(table: TableReport) -> list[str]:
    compaction = table.status.compaction
    assert compaction is not None
    lines = heading("Compaction History (newest first)")
    if compaction.recent_runs:
        lines += grid(
            (
                "Compaction run",
                "Method",
                "Status",
                "Step",
                "Started",
                "Finished",
                "Partition",
                "Changes",
            ),
            [
                (
                    run.id,
                    run.method,
                    info.status_text.split(" (")[0],
                    run.current_step or "-",
                    when(run.started_at),
                    when(run.finished_at, "-"),
                    "-" if run.compacted_partition is None else run.compacted_partition,
                    count(run.changes, "-"),
                )
                for info in compaction.recent_runs
                for run in [info.run]
            ],
        )
    else:
        lines += [INDENT + "No compaction has run.", ""]
    if compaction.snapshot is not None:
        lines += heading(f"Pre-Compaction Snapshot (compaction run {compaction.snapshot.run_id})")
        for entry in compaction.snapshot.entries:
            lines.append(INDENT + f"{entry.role}: {entry.table} version {entry.version}")
            lines.append(INDENT + f"  {entry.command}")
        lines.append("")
    if compaction.retained:
        lines += heading("Retained Obsolete Objects")
        lines += grid(
            ("Kind", "Name", "Location", "Retained", "Compaction run"),
            [
                (
                    item.kind,
                    item.name,
                    item.location or "-",
                    when(item.retained_at),
                    item.compaction_run_id or "-",
                )
                for item in compaction.retained
            ],
        )
    return lines
