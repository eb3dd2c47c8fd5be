"""What the status commands report, as typed records (renderers turn them into text/JSON/HTML).

Times are naive UTC, as the repository stores them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

DEFAULT_BACKLOG_THRESHOLD = 100_000
DEFAULT_WAIT_MINUTES = 60.0


@dataclass(frozen=True, slots=True)
class LakeTableStats:
    """A lake Delta table: where it is and what its current version holds."""

    name: str
    location: str
    exists: bool
    version: int | None = None
    rows: int = 0
    files: int = 0
    size_bytes: int = 0
    committed_at: dt.datetime | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class OffloadInfo:
    """The initial offload of a table."""

    source_dialect: str
    source_table: str
    user_view: str
    offload_type: str
    status: str
    offloaded_at: dt.datetime | None
    rows_offloaded: int | None
    base: LakeTableStats


@dataclass(frozen=True, slots=True)
class ExtractionRunInfo:
    id: int
    status: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    rows_read: int | None
    rows_written: int | None
    control_partition: int | None
    message: str | None


@dataclass(frozen=True, slots=True)
class ExtractionStatus:
    """Phase 2: how far changes have been shipped to the lake."""

    method: str
    position_kind: str
    """What orders changes: ``sequence`` (the changelog's) or ``SCN`` (Oracle's)."""
    max_position: int | None
    last_extraction_at: dt.datetime | None
    runs: int
    succeeded: int
    failed: int
    interrupted: int
    changes_extracted: int
    last_run: ExtractionRunInfo | None
    recent_runs: tuple[ExtractionRunInfo, ...]
    """Newest first."""


@dataclass(frozen=True, slots=True)
class Backlog:
    """Changes captured in the source and not extracted yet."""

    changelog_table: str | None
    rows: int | None
    """None: unknown or not applicable (see ``reason``)."""
    reason: str | None = None
    capture_problems: tuple[str, ...] = ()
    """Why changes are not being captured now (a capture trigger disabled or gone, ...)."""


@dataclass(frozen=True, slots=True)
class SchemaDrift:
    """Source columns that differ from the recorded ones (``gluon.schema_changes``)."""

    summary: str
    refused: bool
    """The lake cannot follow (a dropped column, a type it cannot widen to)."""


@dataclass(frozen=True, slots=True)
class IngestionLocation:
    partition: int
    location: str
    at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class DeltaPartition:
    """One control partition of the delta table."""

    partition: int
    location: str
    rows: int
    files: int
    size_bytes: int
    role: str
    """What the partition is for now (receiving changes, read by the views, ...)."""


@dataclass(frozen=True, slots=True)
class IngestionStatus:
    """Phase 3: which control partition extractions write to."""

    requested: IngestionLocation
    acknowledged: IngestionLocation
    diversion_pending: bool
    """A compaction asked for a new partition and no extraction has switched to it yet."""
    active_partition: int
    view_min_partition: int
    delta: LakeTableStats
    partitions: tuple[DeltaPartition, ...]


@dataclass(frozen=True, slots=True)
class CompactionStepInfo:
    step: str
    status: str
    started_at: dt.datetime
    finished_at: dt.datetime | None
    detail: str | None


@dataclass(frozen=True, slots=True)
class CompactionRunInfo:
    id: int
    method: str
    status: str
    status_text: str
    current_step: str | None
    started_at: dt.datetime
    finished_at: dt.datetime | None
    compacted_partition: int | None
    new_partition: int | None
    changes: int | None
    message: str | None
    steps: tuple[CompactionStepInfo, ...]


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One Delta table version recorded before a compaction changed it."""

    role: str
    table: str
    path: str
    version: int
    query: str
    """Spark SQL that reads this version back ("" when the engine cannot: see ``readable``)."""
    command: str
    """What to run to read it: ``gluon query``, a deltalake one-liner, or why it is gone."""
    readable: str = "engine"
    """``engine`` (VERSION AS OF works), ``deltalake`` (only deltalake reads it: the engine
    cannot time-travel past a newer checkpoint), or ``gone`` (its data was deleted)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    run_id: int
    run_completed: bool
    entries: tuple[SnapshotEntry, ...]


@dataclass(frozen=True, slots=True)
class RetainedObject:
    kind: str
    name: str
    location: str | None
    retained_at: dt.datetime
    compaction_run_id: int | None


@dataclass(frozen=True, slots=True)
class CompactionStatus:
    """Phase 4: compactions, the last snapshot, and objects kept after compactions."""

    ongoing: CompactionRunInfo | None
    last_completed: CompactionRunInfo | None
    completed_runs: int
    snapshot: Snapshot | None
    retained: tuple[RetainedObject, ...]
    recent_runs: tuple[CompactionRunInfo, ...]
    """Newest first."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """An object incremental update relies on (the spec's object listings)."""

    role: str
    object_type: str
    name: str
    location: str | None = None


@dataclass(frozen=True, slots=True)
class LakeObjects:
    base_table: str
    key_columns: tuple[str, ...]
    internal_view: str
    view_kind: str
    user_view: str
    delta_table: str
    delta_path: str
    base_path: str


@dataclass(frozen=True, slots=True)
class TableStatus:
    """Everything ``display_incremental_status`` shows for one table."""

    table_key: str
    collected_at: dt.datetime
    incremental_enabled: bool
    incremental_state: str | None
    """The repository's state (``enabled``, ``enabling``, ``disabling``); None: never enabled."""
    message: str | None
    """A note for a table that is not (fully) enabled."""
    offload: OffloadInfo
    extraction: ExtractionStatus | None = None
    changelog: Backlog | None = None
    schema_drift: SchemaDrift | None = None
    """None: the source's columns are the recorded ones (or the source could not be read)."""
    ingestion: IngestionStatus | None = None
    compaction: CompactionStatus | None = None
    objects: LakeObjects | None = None
    source_objects: tuple[ObjectInfo, ...] = ()
    lake_objects: tuple[ObjectInfo, ...] = ()
    attention: tuple[str, ...] = ()
    """Insert-only notes: rejected or uncaptured changes, an in-place compaction under way."""


# -- offload_status_report ----------------------------------------------------------------


class OutputLevel(StrEnum):
    SUMMARY = "summary"
    """One line per table."""
    DETAIL = "detail"
    """Per table: objects, storage, control partitions, run history, snapshot."""


class OutputFormat(StrEnum):
    TEXT = "text"
    HTML = "html"
    JSON = "json"
    CSV = "csv"


@dataclass(frozen=True, slots=True, kw_only=True)
class Thresholds:
    """When the report says a table needs attention."""

    backlog_rows: int = DEFAULT_BACKLOG_THRESHOLD
    """More changes than this in the changelog, or in the delta table."""
    wait_minutes: float = DEFAULT_WAIT_MINUTES
    """A compaction waiting (or a run running) longer than this."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing about one table that needs an operator."""

    table_key: str
    severity: str
    """``error`` (something failed) or ``warning`` (something is late or large)."""
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class TableReport:
    status: TableStatus
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class Report:
    generated_at: dt.datetime
    gluon_version: str
    level: OutputLevel
    schema_filter: str | None
    table_filter: str | None
    thresholds: Thresholds
    tables: tuple[TableReport, ...]

    @property
    def findings(self) -> tuple[Finding, ...]:
        return tuple(finding for table in self.tables for finding in table.findings)
