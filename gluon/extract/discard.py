"""Discarding pending changes (--incremental-discard-changes): the spec's "manually discarded".

Before disabling incremental update, changes nobody wants in the lake can be
dropped: the rows waiting in the changelog and the changes in the delta
table's live control partitions (those the views still read). The lake then
shows the base table as last compacted. In merge mode IMMEDIATE there is no
delta table to read: what the lake holds besides the base table is at most one
batch staged by a run that died before merging it; discarding empties the
staging table first (so no re-run merges that batch), then the changelog.
Exactly the changelog rows read are deleted (never "up to the highest
sequence"), so a change committed while the command runs stays and is reported
by the next status or disable. PG_LOGICAL keeps no changelog: its replication
slot is advanced past the transactions peeked (the slot's equivalent of
deleting them), so one committed after the peek stays in the slot.

The command holds the extraction and compaction locks, so no extraction ships
and no compaction merges while it deletes; a crash between the two deletes is
completed by running it again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from gluon import source as sources
from gluon.config import Settings
from gluon.errors import StateError
from gluon.extract.feeds import feed_of
from gluon.lake import merge, sql, storage, tables
from gluon.lake.changes import PARTITION_COLUMN
from gluon.lake.session import open_session
from gluon.locks import lifecycle_lock
from gluon.naming import TableRef
from gluon.progress import ShownLine, plan_lines, sentence
from gluon.repo import OffloadedTable, Repository
from gluon.repo.incremental import IncrementalState
from gluon.states import MergeMode, parse_merge_mode

log = logging.getLogger(__name__)


@dataclass(slots=True)
class DiscardResult:
    table_key: str
    executed: bool
    changelog_changes: int | None = 0
    """None: the method keeps no changelog (ORA_ROWSCN: the changes are not countable)."""
    lake_changes: int = 0
    """Delta table changes (DEFERRED) or staged changes not merged yet (IMMEDIATE)."""
    steps: list[str] = field(default_factory=list)
    message: str = ""

    def shown(self) -> list[ShownLine]:
        return [sentence(self.message)] if self.executed else plan_lines(self.table_key, self.steps)


def _enabled(repo: Repository, key: str) -> tuple[OffloadedTable, IncrementalState]:
    record, state = repo.enabled_table(key, otherwise="no changes to discard")
    run = repo.compaction.open_run(key, state.enablement_id)
    if run is not None:
        raise StateError(
            f"compaction run {run.id} of {key} is unfinished and reads the pending changes: "
            f"finish it (`offload -t {key} -x --incremental-run-compaction`) or abandon it "
            f"(`offload -t {key} -x --incremental-abandon-compaction`) first"
        )
    return record, state


def _immediate(state: IncrementalState) -> bool:
    return parse_merge_mode(state.merge_mode) is MergeMode.IMMEDIATE


def _unmerged(record: OffloadedTable, state: IncrementalState) -> merge.StagedBatch | None:
    writer = merge.app_id(state.table_key, state.enablement_id)
    return merge.unmerged_batch(state.delta_path, record.base_path, writer)


def _lake_changes(record: OffloadedTable, state: IncrementalState) -> int:
    if _immediate(state):
        unmerged = _unmerged(record, state)
        return 0 if unmerged is None else unmerged.rows.num_rows
    return storage.delta_row_count(
        state.delta_path, column=PARTITION_COLUMN, at_least=state.view_min_partition
    )


def discard_changes(settings: Settings, ref: TableRef, *, execute: bool) -> DiscardResult:
    """Count (and with ``execute`` delete) the changes of ``ref`` not yet compacted.

    Raises:
        StateError: not enabled, or a compaction run is unfinished.
        LockHeldError: an extraction or compaction of the table is running.
    """
    repo = Repository(settings.repo_url)
    key = ref.key
    record, state = _enabled(repo, key)
    source = sources.connect_configured(settings)
    source.check_connection()
    feed = feed_of(state)(source, record, state, repo)
    result = DiscardResult(
        key,
        execute,
        changelog_changes=feed.backlog(),
        lake_changes=_lake_changes(record, state),
    )
    immediate = _immediate(state)
    unmerged = _unmerged(record, state) if immediate else None
    if unmerged is not None:
        result.steps.append(
            f"discard the {result.lake_changes} changes of staged batch {unmerged.version}, "
            f"not merged into the base table (empty staging table {state.delta_table})"
        )
    result.steps.append(feed.discard_step(result.changelog_changes))
    if not immediate:
        result.steps.append(
            f"delete {result.lake_changes} changes from delta table {state.delta_table} "
            f"(control partitions from {state.view_min_partition})"
        )
    if not execute:
        return result
    with lifecycle_lock(settings, key, "offload --incremental-discard-changes", repo=repo):
        record, state = _enabled(repo, key)  # again, under the locks
        result.lake_changes = _lake_changes(record, state)
        if immediate and result.lake_changes:
            # Through deltalake, no engine to start; first, so a crash after it leaves the
            # batch's changes in the changelog, where a re-run of the discard finds them.
            merge.empty_staging(state.delta_path)
        # The feed as of the state read under the locks; a slot keeps a transaction
        # committed after its peek, a changelog a row written after its read.
        feed = feed_of(state)(source, record, state, repo)
        result.changelog_changes = feed.discard()
        if result.lake_changes and not immediate:
            with open_session(settings) as session:
                tables.register_table(session, state.delta_table, state.delta_path)
                live = sql.partition_range("", state.view_min_partition, None)
                session.execute(sql.delete_where(state.delta_table, live))
    log.info(
        "discarded %s changelog changes and %d delta table changes of %s",
        result.changelog_changes,
        result.lake_changes,
        key,
    )
    from_changelog = (
        "the changes made since the last extraction"
        if result.changelog_changes is None
        else f"{result.changelog_changes} changes from {feed.waits_in}"
    )
    if immediate:
        result.message = (
            f"discarded {from_changelog} and {result.lake_changes} staged changes not merged "
            f"into the base table of {key}; {record.user_view} keeps the changes merged before"
        )
    else:
        result.message = (
            f"discarded {from_changelog} and {result.lake_changes} changes from the delta "
            f"table of {key}; {record.user_view} shows the base table as last compacted"
        )
    return result
