"""The text form of ``display_incremental_status`` (sections in the spec's order)."""

from __future__ import annotations

from gluon.extract.schema_changes import unfilled_message
from gluon.lake.stats import DeltaStats
from gluon.repo.incremental import ExtractionRun
from gluon.repo.verify_runs import VerifyRun
from gluon.states import MergeMode
from gluon.status.compaction_text import compaction_lines
from gluon.status.formatting import count, duration, failure_line, size, when
from gluon.status.lag import SlotBacklog, TableLag
from gluon.status.model import (
    DEFAULT_WAL_RETAINED_MB,
    Backlog,
    ExtractionStatus,
    IngestionStatus,
    OffloadInfo,
    SetAsideChanges,
    TableStatus,
)

Pairs = list[tuple[str, str]]


def nullable_key_message(columns: tuple[str, ...]) -> str:
    """The attention line of a table whose key columns allow NULL."""
    listed = ", ".join(columns)
    return (
        f"key column{'s' if len(columns) > 1 else ''} {listed} "
        f"{'allow' if len(columns) > 1 else 'allows'} NULL (enabled before gluon refused "
        "that): the lake shows every row with a NULL key as one row. Make the column NOT NULL "
        "in the source, or disable incremental update and enable it again with NOT NULL key "
        "columns (--incremental-key-columns)"
    )


def banner(title: str) -> list[str]:
    """A boxed section title."""
    inner = f"| {title.upper()}: |"
    return ["=" * len(inner), inner, "=" * len(inner), ""]


def aligned(pairs: Pairs) -> list[str]:
    """``label:  value`` lines with the values in one column."""
    width = max((len(label) for label, _ in pairs), default=0) + 3
    return [f"{label + ':':<{width}}{value}".rstrip() for label, value in pairs]


def run_counts(extraction: ExtractionStatus) -> str:
    """``3 (2 succeeded, 1 failed, 0 interrupted)``: the extraction runs by outcome."""
    return (
        f"{extraction.runs} ({extraction.succeeded} succeeded, {extraction.failed} failed, "
        f"{extraction.interrupted} interrupted)"
    )


def oldest_pending(lag: TableLag | None) -> str:
    """``waiting 3 min 12 s (captured ...)``, ``none pending`` or ``unknown (why)``."""
    if lag is None:
        return "-"
    if lag.oldest_pending_age_seconds is None:
        return f"unknown ({lag.pending_unknown_reason})"
    if lag.oldest_pending_at is None:
        return "none pending"
    return (
        f"waiting {duration(lag.oldest_pending_age_seconds)} "
        f"(captured {when(lag.oldest_pending_at)})"
    )


def last_latency(lag: TableLag | None) -> str:
    """``1.2 s (extraction run 5, finished ...)`` or ``unknown (why)``."""
    if lag is None:
        return "-"
    if lag.last_latency_seconds is None:
        return f"unknown ({lag.latency_unknown_reason})"
    return (
        f"{duration(lag.last_latency_seconds)} (extraction run {lag.last_shipped_run_id}, "
        f"finished {when(lag.last_shipped_at)})"
    )


MIB = 1024 * 1024


def wal_over_threshold(slot: SlotBacklog, threshold_mb: float) -> bool:
    """The slot keeps more WAL than ``threshold_mb`` MiB."""
    return slot.retained_bytes is not None and slot.retained_bytes > threshold_mb * MIB


def wal_retained(slot: SlotBacklog, threshold_mb: float | None = None) -> str:
    """``3.0 MiB (1.2 MiB not confirmed yet)``, with the way out past ``threshold_mb``."""
    if slot.retained_bytes is None:
        return "unknown (the slot reserves no WAL yet)"
    text = f"{size(slot.retained_bytes)} ({size(slot.unconfirmed_bytes or 0)} not confirmed yet)"
    if threshold_mb is not None and wal_over_threshold(slot, threshold_mb):
        text += (
            f"; WARNING: above {threshold_mb:g} MiB, the source keeps this WAL until an "
            f"extraction confirms it: {wal_way_out(slot)}"
        )
    return text


def wal_way_out(slot: SlotBacklog) -> str:
    """What releases the WAL ``slot`` keeps: a table's own slot goes with the table's
    incremental update; a shared slot stays while any member table reads it."""
    if slot.shared:
        return (
            "run an extraction of each table of the shared slot (a member further behind "
            "than GLUON_PG_LOGICAL_MAX_RETAINED_WAL is left out at the next one's confirm), "
            "or disable incremental update of the tables holding it back"
        )
    return "run an extraction, or disable incremental update (which drops the slot)"


def backlog_line(backlog: Backlog | None) -> tuple[str, str]:
    """The label and value of the changes waiting: in the changelog, or in the slot."""
    if backlog is not None and backlog.slot is not None:
        label = "Changes waiting in the replication slot"
        if backlog.rows is None:
            return label, f"unknown ({backlog.reason})"
        return label, f"{count(backlog.rows)} (in slot {backlog.slot.slot})"
    label = "Changes waiting in the changelog"
    if backlog is None or backlog.rows is None:
        reason = backlog.reason if backlog else "not known"
        waiting = (
            f"not applicable ({reason})"
            if backlog and backlog.changelog_table is None
            else f"unknown ({reason})"
        )
        return label, waiting
    return label, f"{count(backlog.rows)} (in {backlog.changelog_table})"


def offloaded(offload: OffloadInfo) -> str:
    """When the table was offloaded, and how many rows."""
    return f"{when(offload.offloaded_at, 'not yet')} ({count(offload.rows_offloaded)} rows)"


def named_parts(offload: OffloadInfo) -> Pairs:
    """The source partitions and subpartitions offloaded by name (none: no lines)."""
    return [
        (label, ", ".join(names))
        for label, names in (
            ("Offloaded partitions", offload.offloaded_partitions),
            ("Offloaded subpartitions", offload.offloaded_subpartitions),
        )
        if names
    ]


def _section(title: str, pairs: Pairs, extra: list[str] | None = None) -> list[str]:
    return [*banner(title), *aligned(pairs), *(extra or []), ""]


def render_status(
    status: TableStatus,
    *,
    verbose: bool = False,
    wal_retained_threshold_mb: float = DEFAULT_WAL_RETAINED_MB,
) -> str:
    """``status`` as the text ``display_incremental_status`` prints."""
    lines = [f"Incremental update status of {status.table_key} at {when(status.collected_at)}", ""]
    if status.message:
        lines += [status.message[:1].upper() + status.message[1:], ""]
    notes = [*([status.truncation] if status.truncation else []), *status.attention]
    if status.nullable_keys:
        notes.append(nullable_key_message(status.nullable_keys))
    if notes:
        lines += [*banner("Needs attention"), *(f"- {note}" for note in notes), ""]
    if status.set_aside is not None:
        lines += _set_aside(status.set_aside)
    if status.verified is not None:
        lines += [f"Verified: {verified_text(status.verified)}", ""]
    if status.extraction is not None:
        lines += _extraction(status, status.extraction, verbose, wal_retained_threshold_mb)
    if status.ingestion is not None:
        lines += _ingestion(status.ingestion)
    if status.compaction is not None:
        lines += _section("Compaction status", *compaction_lines(status.compaction, verbose))
    if status.objects is not None:
        lines += _section("Misc information", _objects(status))
    lines += _offload(status)
    return "\n".join(lines).rstrip() + "\n"


def _objects(status: TableStatus) -> Pairs:
    objects = status.objects
    assert objects is not None
    if objects.internal_view is None:  # merge mode IMMEDIATE: no views, a staging table
        return [
            ("Base table", objects.base_table),
            ("Key columns", ", ".join(objects.key_columns)),
            ("User table (the base table)", objects.user_view),
            ("Staging table (the last batch)", objects.delta_table),
            ("Staging table location", objects.delta_path),
            ("Base table location", objects.base_path),
        ]
    return [
        ("Base table", objects.base_table),
        ("Key columns", ", ".join(objects.key_columns)),
        (f"Internal delta view ({objects.view_kind})", objects.internal_view),
        ("User view", objects.user_view),
        ("Delta table", objects.delta_table),
        ("Delta table location", objects.delta_path),
        ("Base table location", objects.base_path),
    ]


def set_aside_summary(set_aside: SetAsideChanges) -> str:
    """One sentence: how many changes were set aside, and what that means for the lake."""
    return (
        f"{count(set_aside.count)} change(s) the lake could not take were set aside (moved out "
        "of the changelog, never shipped): the lake may differ from the source for their keys "
        "until those rows change again (docs/operations.md, 'A change the lake cannot take')"
    )


def verified_text(run: VerifyRun) -> str:
    """The latest ``gluon verify``: when, and what it found."""
    if run.differences == 0:
        return f"{when(run.verified_at)}, equal ({count(run.rows_compared)} rows compared)"
    return (
        f"{when(run.verified_at)}, {count(run.differences)} differences "
        f"({run.missing_in_lake} missing in the lake, {run.extra_in_lake} extra in the lake, "
        f"{run.different_values} different values; run gluon verify -t {run.table_key})"
    )


def _set_aside(set_aside: SetAsideChanges) -> list[str]:
    lines = [*banner("Changes set aside"), set_aside_summary(set_aside)]
    for entry in set_aside.latest:
        key = ", ".join(f"{name}={value}" for name, value in entry.key.items())
        lines.append(
            f"- gl_seq {entry.gl_seq} ({entry.op} of {key}), column {entry.column}: "
            f"{entry.value_kind}; set aside {when(entry.set_at)} by {entry.set_by} "
            f"(installation {entry.installation_id})"
        )
    if set_aside.count > len(set_aside.latest):
        lines.append(
            f"  ... {count(set_aside.count - len(set_aside.latest))} more in the repository "
            "(table set_aside_changes)"
        )
    return [*lines, ""]


def _extraction(
    status: TableStatus, extraction: ExtractionStatus, verbose: bool, wal_threshold_mb: float
) -> list[str]:
    backlog = status.changelog
    slot = backlog.slot if backlog else None
    pairs: Pairs = [
        (
            f"Max change {extraction.position_kind} extracted",
            count(extraction.max_position, "none extracted yet"),
        ),
        ("Most recent extraction time", when(extraction.last_extraction_at)),
        ("Extraction method", extraction.method),
        ("Merge mode", _merge_mode(extraction)),
        backlog_line(backlog),
        *([("WAL retained by the slot", wal_retained(slot, wal_threshold_mb))] if slot else []),
        ("Oldest change not in the lake", oldest_pending(status.lag)),
        ("Last source-to-lake latency", last_latency(status.lag)),
        *[
            ("Capture stopped", problem)
            for problem in (backlog.capture_problems if backlog else ())
        ],
        ("Source schema changes", _drift(status)),
        (
            "Extraction runs",
            f"{run_counts(extraction)}; {count(extraction.changes_extracted)} changes shipped",
        ),
    ]
    if status.staging is not None:
        pairs.append(("Changes in the staging table", staging_rows(status.staging.stats)))
    to_partition = extraction.merge_mode != MergeMode.IMMEDIATE
    if extraction.last_run is not None:
        pairs.append(
            (
                "Last extraction run",
                extraction_run_text(extraction.last_run, to_partition=to_partition),
            )
        )
    extra: list[str] = []
    if extraction.merged_versions:
        extra += ["", "Base table versions written by recent extractions (newest first):"]
        extra += [
            f"  version {merged.version} by extraction run {merged.extraction_id}, "
            f"committed {when(merged.committed_at)}"
            for merged in extraction.merged_versions
        ]
        extra.append(f"  read one back with {extraction.read_back}")
    if verbose and extraction.recent_runs:
        extra += ["", "Recent extraction runs (newest first):"]
        extra += [
            f"  {extraction_run_text(run, to_partition=to_partition)}"
            for run in extraction.recent_runs
        ]
    return _section("Change extraction status", pairs, extra)


MERGE_MODE_TEXT = {
    "IMMEDIATE": (
        "IMMEDIATE (each extraction merges its changes into the base table: no views, no "
        "control partitions; the staging table holds only the last batch)"
    ),
    "DEFERRED": "DEFERRED (a delta table and views; compaction merges the changes)",
}


def _merge_mode(extraction: ExtractionStatus) -> str:
    return MERGE_MODE_TEXT.get(extraction.merge_mode, extraction.merge_mode)


def staging_rows(stats: DeltaStats) -> str:
    """What the IMMEDIATE staging table holds: the last batch, merged already."""
    if stats.error:
        return f"unknown ({stats.error})"
    if not stats.exists:
        return "none (no batch staged yet)"
    return f"{count(stats.rows)} (the last batch, merged into the base table already)"


def _drift(status: TableStatus) -> str:
    drift = status.schema_drift
    if drift is None:
        text = "none"
    elif drift.refused:
        text = f"{drift.summary} (the lake cannot follow: extractions stop)"
    else:
        text = f"{drift.summary} (the next extraction carries them)"
    if status.unfilled_columns:  # carried, but not every row's value
        unfilled = unfilled_message(status.unfilled_columns)
        return unfilled if drift is None else f"{text}; {unfilled}"
    return text


def run_label(run: ExtractionRun) -> str:
    """``extraction run 21``: the repository's run id, the one every surface shows (logs,
    the result line, the delta table's ``gl_extraction_id``); it counts the extraction runs
    of every table."""
    return f"extraction run {run.id}"


def extraction_run_text(run: ExtractionRun, *, to_partition: bool = True) -> str:
    """One extraction run: its id, outcome, times, the changes it took from the source
    (``to_partition``: and the control partition they went to; not in merge mode
    IMMEDIATE, which merges them into the base table)."""
    text = f"{run_label(run)} {run.status}, started {when(run.started_at)}"
    if run.finished_at:
        text += f", finished {when(run.finished_at)}"
    if run.rows_read is not None:
        text += f", {count(run.rows_read)} changes"
    if run.rows_written is not None and run.rows_written != run.rows_read:
        text += f" ({count(run.rows_written)} {'written' if to_partition else 'rows merged'})"
    if to_partition and run.control_partition is not None:
        text += f" to control partition {run.control_partition}"
    if run.message:
        text += f": {failure_line(run.message)}"
    return text


def _ingestion(ingestion: IngestionStatus) -> list[str]:
    pairs: Pairs = [
        ("Current requested change ingestion location", ingestion.requested.location),
        ("As of", when(ingestion.requested.at, "unknown")),
        ("Current acknowledged change ingestion location", ingestion.acknowledged.location),
        ("As of", when(ingestion.acknowledged.at, "unknown")),
    ]
    delta = ingestion.delta.stats
    if delta.error:
        total = f"unknown ({delta.error})"
    elif not delta.exists:
        total = "the delta table does not exist yet"
    else:
        total = (
            f"{count(delta.rows)} in {delta.files} files ({size(delta.size_bytes)}), "
            f"Delta version {delta.version}"
        )
    pairs.append(("Changes in the delta table", total))
    extra = []
    if ingestion.diversion_pending:
        extra += [
            "",
            f"A compaction asked for control partition {ingestion.requested.partition}; "
            "the next extraction switches to it and acknowledges.",
        ]
    extra += ["", "Changes per control partition:"]
    extra += [
        f"  {part.partition:>4}: {count(part.rows):>10} changes, {part.files} files, "
        f"{size(part.size_bytes)} ({part.role})"
        for part in ingestion.partitions
    ]
    return _section("Change ingestion status", pairs, extra)


def _offload(status: TableStatus) -> list[str]:
    offload = status.offload
    base = offload.base.stats
    stored = (
        f"{count(base.rows)} rows in {base.files} files ({size(base.size_bytes)}), "
        f"Delta version {base.version}"
        if base.exists and not base.error
        else base.error or "the base table does not exist"
    )
    return _section(
        "Offload information",
        [
            ("Source dialect", offload.source_dialect),
            ("Source table", offload.source_table),
            ("Lake user view", offload.user_view),
            ("Offload type", offload.offload_type),
            ("Offload status", offload.status),
            ("Offloaded at", offloaded(offload)),
            *named_parts(offload),
            ("Base table now", stored),
        ],
    )
