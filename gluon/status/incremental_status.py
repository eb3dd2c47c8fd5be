"""``display_incremental_status``: the incremental update state of one table.

Reads the repository, the Delta logs (deltalake, no Spark) and, for the
changelog backlog, the source database. An unreachable source makes only
that one number unknown; everything else still comes back.

This module assembles the model (``collect_status``: each section read in the order shown);
what is read from the source is ``changelog_counter``'s (``ChangelogCounter``), the
extraction and ingestion sections ``extraction_status``'s.
"""

from __future__ import annotations

from gluon import source as sources
from gluon.capture import objects as source_objects
from gluon.compact.options import CompactionMethod
from gluon.config import Settings
from gluon.extract.feeds import FEEDS, capture_objects
from gluon.extract.insert_only import status_notes
from gluon.extract.truncation import truncation_note
from gluon.lake.stats import delta_stats
from gluon.methods import get_method
from gluon.methods.base import SourceObject, ViewKind
from gluon.naming import TableRef, lake_names
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.incremental import ENABLED, IncrementalState
from gluon.repo.increments import DONE, OffloadIncrement
from gluon.states import MergeMode
from gluon.status.changelog_counter import ChangelogCounter
from gluon.status.compaction_status import compaction_status
from gluon.status.extraction_status import (
    PARTITION_COLUMN,
    SEQUENCE_COLUMN,
    extraction_status,
    ingestion_status,
    with_merges,
)
from gluon.status.model import (
    CompactionStatus,
    LakeObjects,
    LakeTableStats,
    ObjectInfo,
    OffloadInfo,
    SetAsideChanges,
    SetAsideEntry,
    TableStatus,
)

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
    extraction = extraction_status(
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
        extraction = with_merges(extraction, record, history)
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
        ingestion=None if immediate else ingestion_status(state, delta, compaction.ongoing),
        staging=LakeTableStats(state.delta_table, delta) if immediate else None,
        compaction=compaction,
        objects=objects,
        source_objects=_source_objects(
            record, state, statement_level=counter.captures_by_statement(record, state)
        ),
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


def _source_objects(
    record: OffloadedTable, state: IncrementalState, *, statement_level: bool
) -> tuple[ObjectInfo, ...]:
    """The source objects as they exist: a recorded trigger may be several (the dialect's
    declaration, ``capture.created_names``: SQLite has one trigger per event; a changelog
    trigger at ``statement_level`` one per event on PostgreSQL)."""
    dialect = sources.dialect_class(record.source_dialect)
    method = get_method(state.method)
    refs = sorted(capture_objects(state), key=lambda ref: _role_order(ref.kind.value))
    return tuple(
        ObjectInfo(SOURCE_OBJECT_ROLES.get(ref.kind.value, ref.kind.value), ref.object_type, shown)
        for ref in refs
        for name in source_objects.created_names(dialect, method, ref, statement_level)
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
