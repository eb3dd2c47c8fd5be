"""``display_incremental_status``: the incremental update state of one table.

Reads the repository, the Delta logs (deltalake, no Spark) and, for the
changelog backlog, the source database. An unreachable source makes only
that one number unknown; everything else still comes back.

Why one module past 400 lines: one table's status is one read of several places (repository,
Delta logs, source); each section is a small reader function here, in the order shown.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any

from gluon import locks
from gluon import source as sources
from gluon.capture import changelog as capture_changelog
from gluon.capture import existing
from gluon.capture import objects as source_objects
from gluon.compact.options import CompactionMethod
from gluon.config import Settings, SourceTimeouts
from gluon.errors import GluonError
from gluon.extract.feeds import FEEDS, Pending, capture_objects
from gluon.extract.insert_only import status_notes
from gluon.extract.schema_changes import compare, source_changes
from gluon.extract.truncation import truncation_note
from gluon.lake.stats import DeltaStats, delta_stats
from gluon.methods import get_method
from gluon.methods.base import SourceObject, ViewKind
from gluon.naming import TableRef, control_partition_path, lake_names
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.incremental import (
    ENABLED,
    EXTRACTION_RUNNING,
    ExtractionRun,
    ExtractionTotals,
    IncrementalState,
)
from gluon.repo.increments import DONE, OffloadIncrement
from gluon.schema import TableSpec
from gluon.source.base import SourceDialect
from gluon.states import MergeMode
from gluon.status.compaction_status import compaction_status, deltalake_read
from gluon.status.lag import TableLag, measure_lag
from gluon.status.model import (
    Backlog,
    CompactionRunInfo,
    CompactionStatus,
    DeltaPartition,
    ExtractionStatus,
    IngestionLocation,
    IngestionStatus,
    LakeObjects,
    LakeTableStats,
    MergedVersion,
    ObjectInfo,
    OffloadInfo,
    SchemaDrift,
    SetAsideChanges,
    SetAsideEntry,
    TableStatus,
)

PARTITION_COLUMN = "gl_control_partition"
SEQUENCE_COLUMN = "gl_seq"
RECENT_RUNS = 10

SOURCE_OBJECT_ROLES: dict[str, str] = {
    SourceObject.CHANGELOG_TRIGGER.value: "Changelog trigger",
    SourceObject.CHANGELOG_TABLE.value: "Changelog table",
    SourceObject.CHANGELOG_SEQUENCE.value: "Changelog sequence",
    SourceObject.UPDATABLE_VIEW.value: "Updatable view",
    SourceObject.UPDATABLE_TRIGGER.value: "Updatable view trigger",
    SourceObject.LAKE_ROWS_TABLE.value: "Staged lake rows table",
    SourceObject.HYBRID_SCHEMA.value: "Hybrid schema",
}
"""Report labels of the source objects, in the order they are listed."""


@dataclass
class ChangelogCounter:
    """Counts changelog rows, connecting to the source once (and remembering a failure)."""

    source_url: str | None
    timeouts: SourceTimeouts | None = None
    _source: SourceDialect | None = field(default=None, init=False)
    _failure: str | None = field(default=None, init=False)
    _counted: dict[str, int] = field(default_factory=dict, init=False)
    """Changelog rows per table key, counted ahead for many tables (``count_ahead``)."""
    _oldest: dict[str, capture_changelog.OldestChange | None] = field(
        default_factory=dict, init=False
    )
    """The oldest pending change per table key, read ahead with the counts (None: none)."""
    _trigger_states: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict, init=False)
    """The capture trigger's ``capture_trigger_state`` rows per table key, read ahead for
    the tables whose changelogs were counted ahead."""
    _described: dict[str, TableSpec | GluonError] = field(default_factory=dict, init=False)
    """Each table's source description now, per table key, read ahead (``describe_ahead``)."""
    _pending: dict[str, Pending] = field(default_factory=dict, init=False)
    """The changes waiting per table key, read ahead by feeds that count many tables in one
    read (``ChangeFeed.pending_ahead``: a shared slot decoded once for all its members)."""

    def _dialect(self) -> SourceDialect:
        if self._failure:
            raise GluonError(self._failure)
        if self._source is None:
            if not self.source_url:
                self._failure = "GLUON_SOURCE_URL is not set"
                raise GluonError(self._failure)
            try:
                self._source = sources.connect(self.source_url, self.timeouts)
                self._source.check_connection()
            except GluonError as exc:
                self._failure = str(exc)
                raise
        return self._source

    def count_ahead(self, repo: Repository, records: list[OffloadedTable]) -> None:
        """Count the changelogs of ``records`` in one query (a report over 200 tables made
        200 round trips); ``backlog`` then uses these counts. Nothing is counted ahead when
        the source cannot be read or one changelog cannot (each table then finds out)."""
        self._pending_ahead(repo, records)
        tables: list[str] = []
        changelogs: list[source_objects.SourceObjectRef] = []
        triggers: dict[str, tuple[TableSpec, source_objects.SourceObjectRef]] = {}
        for record in records:
            state = repo.incremental.get_state(record.table_key)
            if (
                state is None
                or not FEEDS[get_method(state.method).change_reader].counts_changelog_rows
            ):
                continue
            changelog = source_objects.find_object(
                capture_objects(state), SourceObject.CHANGELOG_TABLE
            )
            if changelog is not None:
                tables.append(record.table_key)
                changelogs.append(changelog)
                trigger = source_objects.find_object(
                    capture_objects(state), SourceObject.CHANGELOG_TRIGGER
                )
                if trigger is not None:
                    triggers[record.table_key] = (record.spec(), trigger)
        if not changelogs:
            return
        try:
            source = self._dialect()
            if any(record.source_dialect != source.name for record in records):
                return
            counts = capture_changelog.count_changes_of(source, changelogs)
        except GluonError:
            return
        self._counted.update(zip(tables, counts, strict=True))
        with contextlib.suppress(GluonError):  # each table reads its own trigger's state
            states = existing.capture_trigger_states_of(source, list(triggers.values()))
            self._trigger_states.update(zip(triggers, states, strict=True))
        try:
            oldest = capture_changelog.oldest_changes_of(source, changelogs)
        except GluonError:
            return  # each table reads its own oldest change (and finds out which fails)
        self._oldest.update(zip(tables, oldest, strict=True))

    def _pending_ahead(self, repo: Repository, records: list[OffloadedTable]) -> None:
        """Read ahead what feeds count for many tables at once (``ChangeFeed.pending_ahead``);
        a failure is each such table's reason (reading again per table would fail as well)."""
        by_feed: dict[type[Any], list[tuple[OffloadedTable, IncrementalState]]] = {}
        for record in records:
            state = repo.incremental.get_state(record.table_key)
            if state is not None:
                feed = FEEDS[get_method(state.method).change_reader]
                by_feed.setdefault(feed, []).append((record, state))
        for feed, tables in by_feed.items():
            try:
                source = self._dialect()
                if any(record.source_dialect != source.name for record, _ in tables):
                    continue
                self._pending.update(feed.pending_ahead(source, repo, tables))
            except GluonError as exc:
                failed = Pending(None, None, str(exc))
                self._pending.update((record.table_key, failed) for record, _ in tables)
                if self._failure:
                    return

    def describe_ahead(self, records: list[OffloadedTable]) -> None:
        """Describe the source tables of ``records`` in one catalog query a database (a
        report over 200 tables made four a table); ``schema_drift`` then compares these.
        Nothing is described ahead when the source cannot be read."""
        if not records:
            return
        try:
            source = self._dialect()
        except GluonError:
            return  # each table finds out
        mine = [record for record in records if record.source_dialect == source.name]
        refs = [TableRef(record.source_schema, record.source_table) for record in mine]
        described = source.describe_tables(refs)
        self._described.update(
            (record.table_key, described[ref]) for record, ref in zip(mine, refs, strict=True)
        )

    def backlog(
        self, record: OffloadedTable, state: IncrementalState, repo: Repository | None = None
    ) -> Backlog:
        """The changes waiting in the source, as the table's feed counts them (``repo``: for
        a feed that counts with it, when not read ahead)."""
        feed = FEEDS[get_method(state.method).change_reader]
        name = feed.held_in(capture_objects(state))
        if not feed.counts_pending:
            return Backlog(None, None, f"{state.method} keeps no changelog")
        try:
            source = self._dialect()
            if source.name != record.source_dialect:
                return Backlog(
                    name,
                    None,
                    f"GLUON_SOURCE_URL is a {source.name} database; "
                    f"the table came from {record.source_dialect}",
                )
            states = self._trigger_states.get(record.table_key)
            ahead = self._pending.get(record.table_key)
            if ahead is None and repo is not None:
                ahead = feed.pending_ahead(source, repo, [(record, state)]).get(record.table_key)
            if ahead is not None:
                return Backlog(name, ahead.count, ahead.unknown_reason, ahead.problems, ahead.slot)
            pending = feed.pending_in(
                source,
                record,
                state,
                counted=self._counted.get(record.table_key),
                oldest=False,
                check_capture=states is None,
            )
            if states is not None:
                # The changelog feed's capture check (its changelog was just counted), with
                # the trigger's state read ahead for every table.
                problems = existing.capture_problems(
                    source,
                    record.spec(),
                    capture_objects(state),
                    changelog_read=True,
                    trigger_states=states,
                )
                pending = replace(pending, problems=tuple(problems))
        except GluonError as exc:
            return Backlog(name, None, str(exc))
        return Backlog(name, pending.count, pending.unknown_reason, pending.problems, pending.slot)

    def lag(self, repo: Repository, state: IncrementalState, backlog: Backlog) -> TableLag:
        """How far the lake is behind (the backlog just counted is not counted again)."""
        if backlog.slot is not None:
            return measure_lag(repo, state, None, slot=backlog.slot)
        if backlog.rows is None:
            return measure_lag(repo, state, None, failure=backlog.reason)
        if state.table_key in self._oldest:
            known = Pending(backlog.rows, self._oldest[state.table_key])
            return measure_lag(repo, state, self._source, known=known)
        return measure_lag(repo, state, self._source, counted=backlog.rows)

    def nullable_keys(self, record: OffloadedTable, state: IncrementalState) -> tuple[str, ...]:
        """The table's key columns that allow NULL (empty: none, or the source is unreadable)."""
        try:
            source = self._dialect()
            if source.name != record.source_dialect:
                return ()
            return source.nullable_key_columns(record.spec(), state.key_columns)
        except GluonError:
            return ()  # the backlog line already says why the source cannot be read

    def schema_drift(self, record: OffloadedTable) -> SchemaDrift | None:
        """How the source's columns differ from the recorded ones (None: same, or unknown)."""
        try:
            source = self._dialect()
            if source.name != record.source_dialect:
                return None
            described = self._described.get(record.table_key)
            if isinstance(described, GluonError):
                return None  # as below: the backlog line says why the source cannot be read
            if described is None:
                changes = source_changes(source, record)
            else:
                changes = compare(record.columns, described.columns)
        except GluonError:
            return None  # the backlog line already says why the source cannot be read
        if not changes.changed:
            return None
        return SchemaDrift(changes.summary(), refused=bool(changes.refused))


def table_status(
    settings: Settings, ref: TableRef, *, earlier_enablements: bool = False
) -> TableStatus:
    """The incremental update status of ``ref``.

    Raises:
        NotFoundError: the repository has no record of the table.
    """
    repo = Repository(settings.repo_url)
    record = repo.offloaded_table(ref.key)
    return collect_status(
        repo,
        record,
        ChangelogCounter(settings.source_url, settings.source_timeouts),
        earlier_enablements=earlier_enablements,
    )


def collect_status(
    repo: Repository,
    record: OffloadedTable,
    counter: ChangelogCounter,
    *,
    history: int = RECENT_RUNS,
    earlier_enablements: bool = False,
) -> TableStatus:
    """Everything known about ``record``'s incremental update (the report calls this per table).

    Args:
        repo: the repository.
        record: the offloaded table.
        counter: counts the changelog backlog (one source connection for many tables).
        history: how many of the latest extraction and compaction runs to include.
        earlier_enablements: include the runs of earlier enablements (disabled since).
    """
    state = repo.incremental.get_state(record.table_key)
    offload = _offload_info(repo, record)
    if state is None:
        return TableStatus(
            table_key=record.table_key,
            collected_at=now(),
            incremental_enabled=False,
            incremental_state=None,
            message=(
                f"incremental update is not enabled for {record.table_key} (enable it with: "
                f"offload -t {record.table_key} -x --incremental-updates-enabled "
                "--incremental-extraction-method=METHOD)"
            ),
            offload=offload,
            lake_objects=(
                ObjectInfo("User view", "VIEW", record.user_view),
                ObjectInfo("Base table", "TABLE", record.base_table, record.base_path),
            ),
            attention=status_notes(repo, record.table_key, None, None, record.user_view),
            set_aside=set_aside_changes(repo, record.table_key),
            verified=repo.verify_runs.latest(record.table_key),
        )
    method = get_method(state.method)
    scope = None if earlier_enablements else state.enablement_id
    compaction = compaction_status(repo, record.table_key, history, scope)
    delta = delta_stats(
        state.delta_path, partition_column=PARTITION_COLUMN, max_columns=(SEQUENCE_COLUMN,)
    )
    immediate = state.merge_mode == MergeMode.IMMEDIATE
    objects = _lake_objects(record, state, method.view_kind.value, immediate=immediate)
    extraction = _extraction_status(
        repo,
        state,
        delta,
        compaction,
        FEEDS[method.change_reader].position_kind,
        history,
        scope,
        immediate=immediate,
    )
    lake_objects: tuple[ObjectInfo, ...] = (
        ObjectInfo("User table (the base table)", "TABLE", objects.user_view, record.base_path),
        ObjectInfo("Base table", "TABLE", objects.base_table, objects.base_path),
        ObjectInfo("Staging table", "TABLE", objects.delta_table, objects.delta_path),
    )
    if immediate:
        extraction = _with_merges(extraction, record, history)
    else:
        lake_objects = (
            ObjectInfo("Delta view", "VIEW", objects.user_view),
            ObjectInfo("Delta table", "TABLE", objects.delta_table, objects.delta_path),
            ObjectInfo("Base table", "TABLE", objects.base_table, objects.base_path),
            ObjectInfo("Internal delta view", "VIEW", objects.internal_view or ""),
        )
    message = None
    if state.status != ENABLED:
        message = (
            f"incremental update of {record.table_key} is {state.status}: the command that "
            "started it did not finish; run it again"
        )
    backlog = counter.backlog(record, state, repo)
    return TableStatus(
        table_key=record.table_key,
        collected_at=now(),
        incremental_enabled=state.status == ENABLED,
        incremental_state=state.status,
        message=message,
        offload=offload,
        extraction=extraction,
        changelog=backlog,
        schema_drift=counter.schema_drift(record),
        unfilled_columns=tuple(column.name for column in record.columns if column.unfilled),
        ingestion=None if immediate else _ingestion_status(state, delta, compaction.ongoing),
        staging=LakeTableStats(state.delta_table, delta) if immediate else None,
        compaction=compaction,
        objects=objects,
        source_objects=_source_objects(record, state),
        lake_objects=lake_objects,
        attention=_insert_only_notes(repo, record, state, compaction),
        nullable_keys=counter.nullable_keys(record, state),
        lag=counter.lag(repo, state, backlog),
        truncation=truncation_note(
            extraction.recent_runs, f"{record.source_schema}.{record.source_table}"
        ),
        set_aside=set_aside_changes(repo, record.table_key),
        verified=repo.verify_runs.latest(record.table_key),
    )


def set_aside_changes(repo: Repository, table_key: str) -> SetAsideChanges | None:
    """The changes of ``table_key`` set aside (None: none ever were)."""
    summary = repo.set_aside.summary(table_key)
    if not summary.count:
        return None
    return SetAsideChanges(
        summary.count,
        tuple(
            SetAsideEntry(
                gl_seq=change.gl_seq,
                op=change.op,
                key=change.key,
                column=change.column_name,
                value_kind=change.value_kind,
                set_at=change.set_at,
                set_by=change.set_by,
                installation_id=change.installation_id,
            )
            for change in summary.latest
        ),
    )


def _with_merges(
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


def _insert_only_notes(
    repo: Repository, record: OffloadedTable, state: IncrementalState, compaction: CompactionStatus
) -> tuple[str, ...]:
    if get_method(state.method).view_kind is not ViewKind.UNION_ALL:
        return ()
    ongoing = compaction.ongoing
    in_place = (
        ongoing.run.id if ongoing and ongoing.run.method == CompactionMethod.IN_PLACE else None
    )
    return status_notes(repo, record.table_key, state.method, in_place, record.user_view)


def _source_objects(record: OffloadedTable, state: IncrementalState) -> tuple[ObjectInfo, ...]:
    """The source objects as they exist: a recorded trigger may be several (the dialect's
    declaration, ``capture.created_names``: SQLite has one trigger per event)."""
    dialect = sources.dialect_class(record.source_dialect)
    method = get_method(state.method)
    refs = sorted(capture_objects(state), key=lambda ref: _role_order(ref.kind.value))
    return tuple(
        ObjectInfo(SOURCE_OBJECT_ROLES.get(ref.kind.value, ref.kind.value), ref.object_type, shown)
        for ref in refs
        for name in source_objects.created_names(dialect, method, ref)
        for shown in [name if ref.schema == ref.name else f"{ref.schema}.{name}"]
    )


def _role_order(kind: str) -> int:
    roles = list(SOURCE_OBJECT_ROLES)
    return roles.index(kind) if kind in roles else len(roles)


def _offload_info(repo: Repository, record: OffloadedTable) -> OffloadInfo:
    done = [i for i in repo.increments.increments(record.table_key) if i.status == DONE]
    return OffloadInfo(
        source_dialect=record.source_dialect,
        source_table=f"{record.source_schema}.{record.source_table}",
        user_view=record.user_view,
        offload_type=record.offload_type,
        status=record.status,
        offloaded_at=record.offloaded_at,
        rows_offloaded=record.row_count,
        base=LakeTableStats(record.base_table, delta_stats(record.base_path)),
        offloaded_partitions=_names(done, "partitions"),
        offloaded_subpartitions=_names(done, "subpartitions"),
    )


def _names(increments: list[OffloadIncrement], kind: str) -> tuple[str, ...]:
    """The source (sub)partitions the ``kind`` increments offloaded, in offload order."""
    return tuple(name for i in increments if i.kind == kind for name in i.names)


def _lake_objects(
    record: OffloadedTable, state: IncrementalState, view_kind: str, *, immediate: bool
) -> LakeObjects:
    names = lake_names(TableRef(record.lake_schema, record.lake_table))
    return LakeObjects(
        base_table=record.base_table,
        key_columns=state.key_columns,
        internal_view=None if immediate else str(names.internal_view(state.view_generation)),
        view_kind=view_kind,
        user_view=record.user_view,
        delta_table=state.delta_table,
        delta_path=state.delta_path,
        base_path=record.base_path,
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


def _extraction_status(
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


def _ingestion_status(
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
