"""What the status commands report, as typed records (renderers turn them into text/JSON/HTML).

Runs, steps and retained objects are the repository's own records; the records
here hold what status derives from them (counts, roles, Delta statistics).

Times are naive UTC, as the repository stores them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from gluon import states
from gluon.lake.stats import DeltaStats
from gluon.locks import INTERRUPTED
from gluon.repo.compaction import CompactionRun, CompactionStep, ObsoleteObject
from gluon.repo.incremental import ExtractionRun
from gluon.repo.verify_runs import VerifyRun
from gluon.status.lag import SlotBacklog, TableLag

DEFAULT_BACKLOG_THRESHOLD = 100_000
DEFAULT_WAIT_MINUTES = 60.0
DEFAULT_LAG_MINUTES = 60.0
DEFAULT_WAL_RETAINED_MB = 1024.0


@dataclass(frozen=True, slots=True)
class LakeTableStats:
    """A lake Delta table: its name and what its current version holds."""

    name: str
    stats: DeltaStats


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
    offloaded_partitions: tuple[str, ...] = ()
    """Source partitions offloaded by name (``--partition-names``), in offload order."""
    offloaded_subpartitions: tuple[str, ...] = ()
    """Source subpartitions offloaded by name (``--subpartition-names``), in offload order."""


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
    """Changes the runs took from the source (their ``rows_read``, a failed run's confirmed
    batches included): what the extraction's result line and
    ``gluon_service_changes_shipped_total`` count too."""
    last_run: ExtractionRun | None
    """Its status is live: ``interrupted`` when recorded running and no process holds its lock."""
    recent_runs: tuple[ExtractionRun, ...]
    """Newest first. A run is named by its repository id everywhere (``extraction run 21``):
    ids count the extraction runs of every table, as logs and ``gl_extraction_id`` do."""
    merge_mode: str = states.MergeMode.DEFERRED.value
    merged_versions: tuple[MergedVersion, ...] = ()
    """Merge mode IMMEDIATE: the base table's versions written by recent extractions, newest
    first."""
    read_back: str | None = None
    """Merge mode IMMEDIATE: how to read one of ``merged_versions`` back (without gluon)."""


@dataclass(frozen=True, slots=True)
class MergedVersion:
    """One Delta version of the base table an extraction's merge wrote (IMMEDIATE mode)."""

    version: int
    extraction_id: int | None
    committed_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class Backlog:
    """Changes captured in the source and not extracted yet."""

    changelog_table: str | None
    rows: int | None
    """None: unknown or not applicable (see ``reason``)."""
    reason: str | None = None
    capture_problems: tuple[str, ...] = ()
    """Why changes are not being captured now (a capture trigger disabled or gone, ...)."""
    slot: SlotBacklog | None = None
    """PG_LOGICAL: the replication slot the changes wait in (None: another method, or the
    slot could not be read)."""


@dataclass(frozen=True, slots=True)
class SchemaDrift:
    """Source columns that differ from the recorded ones (``gluon.extract.schema_changes``)."""

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

    @property
    def live_rows(self) -> int:
        """Changes in the control partitions the views still read."""
        return sum(
            part.rows for part in self.partitions if part.partition >= self.view_min_partition
        )


RUN_STATUS_TEXT: dict[str, str] = {
    states.CompactionStatus.RUNNING: "running",
    states.CompactionStatus.WAITING: "waiting for acknowledgement",
    states.CompactionStatus.FAILED: "failed (run the same compaction command again to resume it)",
    states.CompactionStatus.SUCCESS: "completed",
    INTERRUPTED: "interrupted (run the same command again to resume)",
    states.CompactionStatus.ABANDONED: (
        "abandoned before its views switched (the next compaction starts a new run)"
    ),
}


@dataclass(frozen=True, slots=True)
class CompactionRunInfo:
    """A compaction run with its steps; ``run.status`` is live (``interrupted`` when the
    repository says running and no process holds the table's lock)."""

    run: CompactionRun
    steps: tuple[CompactionStep, ...]

    @property
    def status_text(self) -> str:
        return RUN_STATUS_TEXT.get(self.run.status, self.run.status)


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
class CompactionStatus:
    """Phase 4: compactions, the last snapshot, and objects kept after compactions."""

    ongoing: CompactionRunInfo | None
    last_completed: CompactionRunInfo | None
    completed_runs: int
    snapshot: Snapshot | None
    retained: tuple[ObsoleteObject, ...]
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
    internal_view: str | None
    """None in merge mode IMMEDIATE (no views: sessions read the base table)."""
    view_kind: str
    user_view: str
    delta_table: str
    delta_path: str
    base_path: str


@dataclass(frozen=True, slots=True)
class SetAsideEntry:
    """One change set aside (``gluon.extract.set_aside``): out of the changelog, never shipped."""

    gl_seq: int
    op: str
    key: dict[str, str | None]
    column: str
    value_kind: str
    set_at: dt.datetime
    set_by: str
    installation_id: str


@dataclass(frozen=True, slots=True)
class SetAsideChanges:
    """The table's changes set aside because the lake could not take a value of theirs."""

    count: int
    latest: tuple[SetAsideEntry, ...]
    """Newest first (the repository holds them all)."""


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
    """None in merge mode IMMEDIATE: no control partitions (see ``staging``)."""
    staging: LakeTableStats | None = None
    """Merge mode IMMEDIATE: the staging table, holding the last batch (merged already)."""
    compaction: CompactionStatus | None = None
    objects: LakeObjects | None = None
    source_objects: tuple[ObjectInfo, ...] = ()
    lake_objects: tuple[ObjectInfo, ...] = ()
    attention: tuple[str, ...] = ()
    """Insert-only notes: rejected or uncaptured changes, an in-place compaction under way."""
    lag: TableLag | None = None
    """How far the lake is behind the source (None: incremental update is not enabled)."""
    nullable_keys: tuple[str, ...] = ()
    """Key columns that allow NULL, which enable refuses now (a table enabled before that):
    the lake shows every row with a NULL key as one row."""
    truncation: str | None = None
    """The source may have been truncated: its last counted extraction found fewer rows in
    it than the lake shows (``gluon.extract.truncation``; None: not found, or not counted)."""
    set_aside: SetAsideChanges | None = None
    """Changes set aside out of the changelog (None: none ever were)."""
    verified: VerifyRun | None = None
    """The latest ``gluon verify`` of the table (None: never verified)."""
    unfilled_columns: tuple[str, ...] = ()
    """Columns added with a per-row (volatile) default no change carried: the lake's rows
    unchanged since show NULL (``gluon.extract.schema_changes``)."""


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
    lag_minutes: float = DEFAULT_LAG_MINUTES
    """The oldest change not in the lake yet waiting longer than this."""
    wal_retained_mb: float = DEFAULT_WAL_RETAINED_MB
    """PG_LOGICAL: more WAL than this (MiB) kept by the table's replication slot."""


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
