"""The two ways an extraction ships a batch: ``AppendToDeltaTable`` appends it to the delta
table (merge mode DEFERRED, the views merge it), ``MergeImmediately`` stages it and merges it
into the base table in one Delta commit that records the batch (merge mode IMMEDIATE).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from gluon.extract.already_shipped import shipped_before
from gluon.extract.counting import BatchCounter
from gluon.extract.feeds import ChangeFeed
from gluon.extract.result import ExtractionResult
from gluon.faults import fault_point
from gluon.lake import merge
from gluon.lake.changes import append_changes, holds_truncate, without_shipped
from gluon.lake.session import LakeSession, retry_commit
from gluon.methods import get_method
from gluon.methods.base import ViewKind
from gluon.repo import OffloadedTable
from gluon.repo.incremental import IncrementalState
from gluon.schema import lake_column

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


@dataclass(slots=True)
class AppendToDeltaTable:
    """Merge mode DEFERRED: append each batch to the delta table (the views merge it)."""

    lake: Callable[[], LakeSession]
    feed: ChangeFeed
    record: OffloadedTable
    state: IncrementalState
    result: ExtractionResult

    left_out = "already in the lake"

    @property
    def destination(self) -> str:
        return f"control partition {self.result.control_partition}"

    def resume(self) -> None:
        """Nothing to finish first: a batch a dead run appended is skipped by its gl_seq."""

    def ship(self, changes: pa.Table) -> int:
        """Append ``changes`` not yet in the lake in one commit; return how many."""
        return int(
            retry_commit(
                partial(
                    _append, self.lake, self.feed, self.record, self.state, self.result, changes
                )
            )
        )


@dataclass(slots=True)
class MergeImmediately:
    """Merge mode IMMEDIATE: stage each batch, merge it into the base table in one Delta
    commit that records the batch (see ``gluon.lake.merge``)."""

    lake: Callable[[], LakeSession]
    feed: ChangeFeed
    record: OffloadedTable
    state: IncrementalState
    result: ExtractionResult
    counter: BatchCounter

    left_out = "superseded in the batch or refused"

    @property
    def destination(self) -> str:
        return f"the base table {self.record.base_path}"

    def resume(self) -> None:
        """Finish the batch a dead run staged: merge it unless the base table applied it,
        then remove its changes from the changelog (again, if that was done already).

        Only a batch of a run that did not succeed: a run that succeeded removed its changes
        itself, and a change now in the changelog with one of its ``gl_seq`` is a new change
        under a reset sequence (removing it would lose it; ``shipped_before`` refuses it).
        """
        unconfirmed = self.feed.repo.incremental.unconfirmed_extractions(self.state.table_key)
        unconfirmed.discard(self.result.run_id)  # this run: it staged nothing yet
        writer = merge.app_id(self.state.table_key, self.state.enablement_id)
        if not unconfirmed and merge.merged_already(
            self.state.delta_path, self.record.base_path, writer
        ):
            return  # the usual case: the last run's batch, merged and done (no rows read)
        staged = merge.staged_batch(self.state.delta_path, columns=["gl_seq", "gl_extraction_id"])
        if staged is None:
            return
        merged = self._apply(staged)
        if staged.extraction_id not in unconfirmed:
            return
        # This run's changes, unless the dead run counted them (status and the metric count
        # them); counted before they leave the source.
        self.counter.count(staged.rows, merged)
        self.feed.done(staged.rows)
        log.debug("staged batch %d is in the base table and out of the changelog", staged.version)

    def ship(self, changes: pa.Table) -> int:
        """Stage ``changes`` and merge them; return how many changes the merge applied."""
        import pyarrow.compute as pc  # only when there are changes to ship

        self.feed.shipping(changes)
        if self.result.screen is not None:
            let_in = self.result.screen(self.lake(), changes).column("gl_seq")
            applied = pc.is_in(changes.column("gl_seq"), value_set=let_in.combine_chunks())
        else:
            keys = [lake_column(key) for key in self.state.key_columns]
            applied = merge.latest_per_key(changes, keys)
        applied = merge.after_truncate(changes, applied)
        staged = merge.stage_batch(
            self.lake,
            self.state.delta_path,
            self.record.columns,
            self.record.partitioning,
            changes,
            applied=applied,
            extraction_id=self.result.run_id,
        )
        fault_point("extract.after_stage")
        self._apply(staged)
        return int(pc.sum(applied).as_py() or 0)

    def _apply(self, staged: merge.StagedBatch) -> int:
        """Merge ``staged`` unless the base table applied it; return the rows merged now."""
        writer = merge.app_id(self.state.table_key, self.state.enablement_id)
        base = merge.open_base(self.record.base_path)  # read once: the check, then the merge
        applied = merge.applied_batch(base, writer)
        if applied is not None and applied >= staged.version:
            return 0  # a dead run merged it: the base table recorded the batch in that commit
        if "gl_op" not in staged.rows.column_names:
            staged = staged.complete(self.state.delta_path)
            log.info("merging batch %d, staged by an interrupted run", staged.version)
        insert_only = get_method(self.state.method).view_kind is ViewKind.UNION_ALL
        fault_point("extract.before_merge_commit")
        version = merge.merge_batch(
            self.record.base_path,
            writer,
            [lake_column(key) for key in self.state.key_columns],
            staged,
            insert_only=insert_only,
            table=base,
        )
        fault_point("extract.after_merge_commit")
        self.result.lake_versions.append(version)
        return merge.applied_rows(staged)


def _append(
    lake: Callable[[], LakeSession],
    feed: ChangeFeed,
    record: OffloadedTable,
    state: IncrementalState,
    result: ExtractionResult,
    changes: pa.Table,
) -> int:
    """Append the changes not yet in the lake; return how many.

    Idempotent, so a lost commit race can retry it: the check runs again, since a commit
    that raced a compaction's delete may have landed before its error came back.
    """
    skip = shipped_before(lake, feed, state, changes)
    fresh = changes.num_rows if skip is None else skip.fresh
    if fresh:
        # The highest gl_seq of the batch: a change an interrupted run shipped already was
        # recorded by that run, so this never records more than what is about to ship.
        feed.shipping(changes)
    if result.screen is not None:
        # The screen looks at the rows themselves: the engine filters them first.
        session = lake()
        if skip is not None:
            changes = without_shipped(session, record.columns, changes, skip.batch)
            skip = None
        changes = result.screen(session, changes)
        fresh = changes.num_rows
    if fresh and holds_truncate(changes):
        # Before the commit: views and compactions of this partition must apply the 'T' as
        # soon as a session can see it (a commit that never lands only costs them a scan).
        feed.repo.incremental.record_truncate(state.table_key, result.control_partition)
    fault_point("extract.before_delta_commit")
    if fresh:
        append_changes(
            lake,
            state.delta_path,
            record.columns,
            changes,
            extraction_id=result.run_id,
            partition=result.control_partition,
            skip=None if skip is None else skip.batch,
        )
    return fresh
