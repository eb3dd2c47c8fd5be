"""The extraction and ingestion sections of one table's status, from the repository and the
delta table's Delta log: the runs (one recorded as running that no process holds the lock of
shown interrupted), the highest position shipped, the control partitions and their roles, and
in merge mode IMMEDIATE the base table's versions the merges wrote.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from gluon import locks
from gluon.lake.stats import DeltaStats, delta_stats
from gluon.naming import control_partition_path
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import (
    EXTRACTION_RUNNING,
    ExtractionRun,
    ExtractionTotals,
    IncrementalState,
)
from gluon.states import MergeMode
from gluon.status.compaction_status import deltalake_read
from gluon.status.model import (
    CompactionRunInfo,
    CompactionStatus,
    DeltaPartition,
    ExtractionStatus,
    IngestionLocation,
    IngestionStatus,
    LakeTableStats,
    MergedVersion,
)

PARTITION_COLUMN = "gl_control_partition"
SEQUENCE_COLUMN = "gl_seq"


def with_merges(
    extraction: ExtractionStatus, record: OffloadedTable, history: int
) -> ExtractionStatus:
    """Merge mode IMMEDIATE: the base table's versions written by recent extractions (from
    its Delta history), and how to read one back."""
    from gluon.lake.merge import recent_merges

    merges = tuple(
        MergedVersion(
            commit.version,
            commit.extraction_id,
            None
            if commit.timestamp_ms is None
            else dt.datetime.fromtimestamp(commit.timestamp_ms / 1000, dt.UTC).replace(tzinfo=None),
        )
        for commit in recent_merges(record.base_path, max(history, 1))
    )
    return replace(
        extraction,
        merge_mode=MergeMode.IMMEDIATE.value,
        merged_versions=merges,
        read_back=(
            f"{deltalake_read(record.base_path, 'N')} "
            f"or polars.read_delta({record.base_path!r}, version=N) (versions older than "
            "the vacuum retention of the last compaction are gone)"
        ),
    )


def _with_live_status(repo: Repository, run: ExtractionRun) -> ExtractionRun:
    """An extraction recorded as running that no process holds the lock of was interrupted."""
    if run.status != EXTRACTION_RUNNING or locks.is_held(
        repo, run.table_key, locks.EXTRACTION, locks.EXTRACTION_COMMAND
    ):
        return run
    return replace(
        run,
        status=locks.INTERRUPTED,
        message=run.message or "no process holds its lock; run the same command again to resume",
    )


def extraction_status(
    repo: Repository,
    state: IncrementalState,
    delta: DeltaStats,
    compaction: CompactionStatus,
    position_kind: str,
    history: int,
    scope: int | None,
    *,
    immediate: bool,
) -> ExtractionStatus:
    totals = repo.incremental.extraction_totals(state.table_key, scope)
    recorded = repo.incremental.extraction_runs(state.table_key, history, enablement_id=scope)
    recent = [_with_live_status(repo, run) for run in recorded]
    dead = sum(1 for before, now_ in zip(recorded, recent, strict=True) if before is not now_)
    return ExtractionStatus(
        method=state.method,
        position_kind=position_kind,
        # IMMEDIATE: the staging table may hold a batch whose merge failed (not extracted).
        max_position=_max_position(state, totals, None if immediate else delta, compaction),
        last_extraction_at=totals.last_success_at,
        runs=totals.runs,
        succeeded=totals.succeeded,
        failed=totals.failed,
        interrupted=totals.interrupted + dead,
        changes_extracted=totals.changes_shipped,
        last_run=recent[0] if recent else None,
        recent_runs=tuple(recent),
    )


def _max_position(
    state: IncrementalState,
    totals: ExtractionTotals,
    delta: DeltaStats | None,
    compaction: CompactionStatus,
) -> int | None:
    """The highest change position shipped: the stored SCN, else the highest ``gl_seq`` seen.

    ``gl_seq`` comes from the runs (when they record it), the delta table's
    file statistics, and the delta table as the last snapshot kept it (its
    compacted partitions may be gone from the current version).
    """
    if state.last_scn is not None:
        return state.last_scn
    if delta is None:
        return totals.max_seq
    found = [totals.max_seq, delta.max_value(SEQUENCE_COLUMN)]
    snapshot = compaction.snapshot
    for entry in snapshot.entries if snapshot else ():
        if entry.path == state.delta_path:
            older = delta_stats(entry.path, version=entry.version, max_columns=(SEQUENCE_COLUMN,))
            found.append(older.max_value(SEQUENCE_COLUMN))
    values = [int(value) for value in found if value is not None]
    return max(values) if values else None


def _location(state: IncrementalState, partition: int) -> str:
    return control_partition_path(state.delta_path, PARTITION_COLUMN, partition)


def _ingestion_location(
    state: IncrementalState, partition: int | None, at: dt.datetime | None
) -> IngestionLocation:
    """Where ``partition`` is; none recorded: the active partition, as of enabling."""
    if partition is None:
        partition, at = state.active_partition, state.enabled_at
    return IngestionLocation(partition, _location(state, partition), at)


def ingestion_status(
    state: IncrementalState, delta: DeltaStats, ongoing: CompactionRunInfo | None
) -> IngestionStatus:
    requested = _ingestion_location(state, state.requested_partition, state.requested_at)
    acknowledged = _ingestion_location(state, state.acknowledged_partition, state.acknowledged_at)
    pending = (
        state.requested_partition is not None and requested.partition != acknowledged.partition
    )
    counted = {int(part.value): part for part in delta.partitions if part.value is not None}
    numbers = sorted(
        {*counted, state.active_partition, *([requested.partition] if pending else [])}
    )
    partitions = [
        DeltaPartition(
            partition=number,
            location=_location(state, number),
            rows=part.rows if part else 0,
            files=part.files if part else 0,
            size_bytes=part.size_bytes if part else 0,
            role=_partition_role(number, state, pending, ongoing),
        )
        for number in numbers
        for part in [counted.get(number)]
    ]
    return IngestionStatus(
        requested=requested,
        acknowledged=acknowledged,
        diversion_pending=pending,
        active_partition=state.active_partition,
        view_min_partition=state.view_min_partition,
        delta=LakeTableStats(state.delta_table, delta),
        partitions=tuple(partitions),
    )


def _partition_role(
    number: int, state: IncrementalState, pending: bool, ongoing: CompactionRunInfo | None
) -> str:
    if number < state.view_min_partition:
        return "compacted, no longer read by the views"
    if ongoing is not None and ongoing.run.compacted_partition == number:
        return f"being compacted by compaction run {ongoing.run.id}"
    if pending and number == state.requested_partition:
        return "requested for new changes, awaiting acknowledgement"
    if number == state.active_partition:
        return "receiving new changes"
    return "read by the views"
