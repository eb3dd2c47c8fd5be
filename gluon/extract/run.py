"""Extraction: ship the captured changes into the lake's delta table, exactly once.

Per batch: read the changes visible now (lowest ``gl_seq`` first), drop those
already in the delta table (a previous run that died after its Delta commit),
append the rest in one Delta commit, then delete exactly the rows read from
the changelog. A crash between any two steps is repaired by the next run:
rows still in the changelog are read again and the ones already committed to
the lake are skipped by their ``gl_seq``.

When a compaction has requested change ingestion diversion, the run writes to
the requested control partition and acknowledges it when it finishes.

Why one module past 400 lines: the exactly-once protocol (read, leave out what was shipped,
commit, delete) reads as one sequence here; its seams, if it grows, are the two sinks
(``_AppendToDeltaTable``, ``_MergeImmediately``) and the already-shipped check.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from gluon import locks
from gluon import source as sources
from gluon.capture import changelog, existing
from gluon.config import Settings
from gluon.errors import GluonError, StateError, UsageError
from gluon.extract.counting import BatchCounter
from gluon.extract.feeds import FEEDS, REBUILD_HINT, ChangeFeed, capture_objects
from gluon.extract.insert_only import Screen
from gluon.extract.schema_changes import carry_changes
from gluon.extract.truncation import RowCounts, count_rows, counts_rows, last_lake_rows
from gluon.faults import fault_point
from gluon.lake import merge, tables
from gluon.lake.changes import (
    PARTITION_COLUMN,
    BatchRange,
    append_changes,
    holds_truncate,
    shipped_by_run,
    without_shipped,
)
from gluon.lake.session import LakeOpener, LakeSession, lake_opener, retry_commit
from gluon.lake.storage import delta_row_count, missing_delta_table_error
from gluon.locks import extraction_lock
from gluon.methods import get_method
from gluon.methods.base import ViewKind
from gluon.naming import TableRef
from gluon.progress import NullProgress, Progress, ShownLine, timed_step
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.incremental import IncrementalState
from gluon.schema import lake_column
from gluon.states import ExtractionStatus, MergeMode

if TYPE_CHECKING:
    import pyarrow as pa

    from gluon.source.base import SourceDialect

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 100_000
"""Changes per batch in merge mode DEFERRED: each batch is an append, costing per change."""
IMMEDIATE_BATCH_SIZE = 500_000
"""Changes per batch in merge mode IMMEDIATE: each batch is a merge that rewrites every base
file its keys touch, a cost per batch more than per change (a 200k-change backlog of 2
partitions of a 2M-row table in batches of 100k rewrote them twice: 1.5x the time of one
batch). Larger than DEFERRED's, still bounding the memory a batch holds."""
MAX_BATCH_SIZE = 2**31 - 1
"""The largest batch every source's LIMIT/FETCH FIRST and the DBAPI fetch size accept."""


def default_batch_size(merge_mode: MergeMode) -> int:
    """The batch size of an extraction given none (``--incremental-batch-size``)."""
    return IMMEDIATE_BATCH_SIZE if merge_mode == MergeMode.IMMEDIATE else DEFAULT_BATCH_SIZE


def check_batch_size(batch_size: int) -> None:
    """Refuse a batch size no source accepts, before anything runs.

    Raises:
        UsageError: ``batch_size`` is out of range.
    """
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise UsageError(
            f"--incremental-batch-size must be between 1 and {MAX_BATCH_SIZE}, found {batch_size}"
        )


class CaptureBrokenError(GluonError):
    """Changes are not being captured (a capture trigger disabled or gone, no changelog)."""


@dataclass(slots=True)
class ExtractionResult:
    table_key: str
    run_id: int
    rows_read: int = 0
    rows_written: int = 0
    min_seq: int | None = None
    max_seq: int | None = None
    control_partition: int = 0
    acknowledged: bool = False
    seconds: float = 0.0
    screen: Screen | None = None
    """Insert-only methods: what kept changes out of the lake (``gluon.extract.insert_only``)."""
    row_counts: RowCounts | None = None
    """Where the capture cannot see a TRUNCATE: the rows compared at the run's end."""
    lake_versions: list[int] = field(default_factory=list)
    """Merge mode IMMEDIATE: the base table's Delta versions this run's merges wrote."""
    oldest_change_at: dt.datetime | None = None
    """When the oldest change this run found pending was captured (for the lake's latency)."""
    merge_mode: MergeMode = MergeMode.DEFERRED
    recorded: bool = True
    """False: the run shipped nothing and left no row in the repository (the service)."""

    def took(self, changes: pa.Table, written: int, *, counted_before: int = 0) -> None:
        """Count ``changes`` as taken from the source by this run, ``written`` of them into
        the lake, and widen the run's ``gl_seq`` range; ``counted_before`` of them a killed run
        counted already (``gluon.extract.counting``)."""
        import pyarrow.compute as pc

        self.rows_read += changes.num_rows - counted_before
        self.rows_written += written
        seqs = changes.column("gl_seq")
        low, high = pc.min(seqs).as_py(), pc.max(seqs).as_py()
        self.min_seq = low if self.min_seq is None else min(self.min_seq, low)
        self.max_seq = high if self.max_seq is None else max(self.max_seq, high)

    def summary(self) -> str:
        """The run in one line. Its count is ``rows_read``, the changes taken from the source:
        the figure status, the report and the service's metrics count too (``rows_written``
        is what the lake got: fewer when a merge applies only each key's latest change, or
        a change was in the lake already or refused)."""
        if self.merge_mode == MergeMode.IMMEDIATE:
            where = f"into the base table ({self.rows_written} rows merged)"
        else:
            where = f"to control partition {self.control_partition}"
            if self.rows_written != self.rows_read:
                where += f" ({self.rows_read - self.rows_written} already in the lake or refused)"
        return (
            f"Extracted {self.rows_read} changes of {self.table_key} {where} in "
            f"{self.seconds:.1f}s (extraction run {self.run_id})"
        )

    def shown(self) -> list[ShownLine]:
        ack = ", acknowledged change ingestion diversion" if self.acknowledged else ""
        lines = [ShownLine(self.summary() + ack)]
        for line in self.screen.messages() if self.screen else ():
            lines.append(ShownLine(f"{self.table_key}: {line}", "warning"))
        if self.row_counts is not None and self.row_counts.dropped:
            at_end = self.row_counts.warning(self.table_key, "at the end of this extraction")
            lines.append(ShownLine(at_end, "warning"))
        return lines


NOT_ENABLED_HINT = (
    "enable it with --incremental-updates-enabled --incremental-extraction-method=METHOD"
)


def nothing_waiting(settings: Settings, table_key: str) -> bool:
    """The table's feed counts no change waiting: an extraction would ship nothing.

    What the service asks before an extraction, to skip the lock, the repository's run
    row, the catalog comparison and the capture check of a run that would find nothing
    (about 40 ms a table). Reads only; False whenever it cannot tell (a feed that counts
    by reading, such as a replication slot's; a diversion to acknowledge; an error: the
    run then reports it).
    """
    try:
        repo = Repository(settings.repo_url)
        record, state = repo.enabled_table(table_key, otherwise=NOT_ENABLED_HINT)
        if state.diverting:
            return False
        feed = FEEDS[get_method(state.method).change_reader](
            sources.connect_configured(settings), record, state, repo
        )
        return feed.pending() == 0
    except GluonError:
        return False


def run_extraction(
    settings: Settings,
    ref: TableRef,
    *,
    batch_size: int | None = None,
    progress: Progress | None = None,
    stopping: Callable[[], bool] | None = None,
    record_empty: bool = True,
    check_capture: bool = True,
) -> ExtractionResult:
    """Extract the changes of ``ref`` (holding its extraction lock).

    ``batch_size``: changes per batch (None: :func:`default_batch_size` of the table's merge
    mode). ``stopping``: asked after each batch's commit; True ends the run there, as a success
    (the service stopping; the next run ships the rest). ``record_empty=False``: a run
    that found nothing to ship leaves no row in the repository (the service counts it in
    memory; ``discard_empty_extraction`` says when a row must stay). ``check_capture=False``:
    the capture objects are not checked this run (the service checks them every few minutes
    of a busy table, not every run; a missing changelog still fails the read).

    Raises:
        LockHeldError: another extraction, or a lifecycle command other than a compaction,
            is running on the table.
        StateError: incremental update is not enabled.
    """
    started = time.monotonic()
    open_lake = lake_opener(settings)  # what the steps below are given, not the settings
    repo = Repository(settings.repo_url)
    repo.enabled_table(ref.key, otherwise=NOT_ENABLED_HINT)
    with extraction_lock(settings, ref.key, repo=repo):
        record, state = repo.enabled_table(ref.key, otherwise=NOT_ENABLED_HINT)  # under the lock
        method = get_method(state.method)
        source = sources.connect_configured(settings)
        with timed_step("schema_changes"):
            record = carry_changes(
                source, repo, record, state, open_lake=open_lake, run_dir=settings.run_dir
            )
        feed: ChangeFeed = FEEDS[method.change_reader](source, record, state, repo)
        partition = state.ingestion_partition
        if partition is None:
            raise StateError(
                f"the incremental state of {ref.key} names no control partition to write to: "
                "its repository record is incomplete"
            )
        result = ExtractionResult(
            ref.key, repo.incremental.start_extraction(ref.key, state.enablement_id)
        )
        result.control_partition = partition
        result.merge_mode = MergeMode(state.merge_mode or MergeMode.DEFERRED)
        if method.view_kind is ViewKind.UNION_ALL:
            result.screen = Screen(repo, ref.key, method.name)
        try:
            problems: list[str] = []
            if check_capture:
                with timed_step("check_capture"):
                    problems = existing.capture_problems(
                        source, record.spec(), capture_objects(state), truncate=False
                    )
            if any(problem.startswith("changelog table") for problem in problems):
                raise CaptureBrokenError("; ".join(problems))  # nothing to read: a failed run
            with timed_step("ship_changes") as shipping:
                _ship(
                    open_lake,
                    source,
                    feed,
                    record,
                    state,
                    result,
                    batch_size or default_batch_size(result.merge_mode),
                    progress or NullProgress(),
                    stopping or _never,
                )
                shipping.detail = f"{result.rows_read} changes read, {result.rows_written} written"
            if counts_rows(source, state):
                with timed_step("count_rows") as counting:
                    result.row_counts = _count_rows(repo, source, record, state, result)
                    counts = result.row_counts
                    counting.detail = (
                        "nothing to compare with yet"
                        if counts is None
                        else f"source {counts.source_rows}, lake at least {counts.lake_rows}"
                    )
        except BaseException as exc:
            repo.incremental.finish_extraction(
                result.run_id,
                status=ExtractionStatus.FAILED,
                message=str(exc)[:2000],
                rows_read=result.rows_read,
                rows_written=result.rows_written,
            )
            if isinstance(exc, GluonError):
                gone = missing_delta_table_error(ref.key, state.delta_path)
                if gone is not None:
                    gone.changes_taken = result.rows_read
                    raise gone from exc
                exc.changes_taken = result.rows_read
            raise
        fault_point("extract.before_repository_update")
        if state.diverting:
            repo.incremental.update_state(
                ref.key,
                active_partition=partition,
                acknowledged_partition=partition,
                acknowledged_at=now(),
            )
            result.acknowledged = True
            log.info("acknowledged change ingestion diversion to control partition %d", partition)
        if not record_empty and _empty(result, problems):
            result.recorded = not repo.incremental.discard_empty_extraction(ref.key, result.run_id)
        if result.recorded:
            _finish(repo, result, partition)
    result.seconds = time.monotonic() - started
    if problems:
        # What was captured is in the lake now; the operator must hear that capture stopped.
        stopped = CaptureBrokenError(
            f"shipped {result.rows_read} changes, but " + "; ".join(problems)
        )
        stopped.changes_taken = result.rows_read  # counted by the service although it failed
        raise stopped
    return result


def _empty(result: ExtractionResult, problems: list[str]) -> bool:
    """The run changed nothing a later reader needs its row for."""
    return (
        result.rows_read == 0
        and not result.acknowledged
        and not problems
        and result.row_counts is None
    )


def _finish(repo: Repository, result: ExtractionResult, partition: int) -> None:
    repo.incremental.finish_extraction(
        result.run_id,
        status=ExtractionStatus.SUCCESS,
        rows_read=result.rows_read,
        rows_written=result.rows_written,
        min_seq=result.min_seq,
        max_seq=result.max_seq,
        control_partition=partition,
        oldest_change_at=result.oldest_change_at if result.rows_read else None,
        source_rows=result.row_counts.source_rows if result.row_counts else None,
        lake_rows=result.row_counts.lake_rows if result.row_counts else None,
    )


def _ship(
    open_lake: LakeOpener,
    source: SourceDialect,
    feed: ChangeFeed,
    record: OffloadedTable,
    state: IncrementalState,
    result: ExtractionResult,
    batch_size: int,
    progress: Progress,
    stopping: Callable[[], bool],
) -> None:
    feed.verify()
    pending = feed.pending()
    if pending == 0:
        log.info("no changes to extract for %s", record.table_key)
        return
    # Read before anything ships (the shipped rows leave the changelog); not on the no-op path.
    oldest = changelog.oldest_change(source, capture_objects(state))
    result.oldest_change_at = oldest.captured_at if oldest else None

    with ExitStack() as stack:
        session: LakeSession | None = None

        def lake() -> LakeSession:
            nonlocal session
            if session is None:
                with timed_step("start_engine"):
                    session = stack.enter_context(open_lake())
                    tables.register_table(session, state.delta_table, state.delta_path)
            return session

        counter = BatchCounter(feed.repo, result, feed.sequences_are_unique, feed.batches_in_order)
        shipping = (
            _MergeImmediately(lake, feed, record, state, result, counter)
            if state.merge_mode == MergeMode.IMMEDIATE
            else _AppendToDeltaTable(lake, feed, record, state, result)
        )
        task = stack.enter_context(progress.task(f"extracting {record.table_key}", pending))
        shipping.resume()
        while True:
            with timed_step("read") as reading:
                changes = feed.read(batch_size)
                reading.detail = f"{changes.num_rows} changes"
            if changes.num_rows == 0:
                break
            if result.oldest_change_at is None:
                result.oldest_change_at = feed.oldest_change_at  # e.g. from a slot's COMMIT
            with timed_step("write") as writing:
                fresh = shipping.ship(changes)
                writing.detail = f"{fresh} changes"
            fault_point("extract.after_delta_commit")
            counter.count(changes, fresh)  # before the source lets go of them
            with timed_step("done"):
                feed.done(changes)
            task.advance(changes.num_rows)
            log.info(
                "shipped %d changes (%d %s) to %s",
                changes.num_rows,
                changes.num_rows - fresh,
                shipping.left_out,
                shipping.destination,
            )
            if changes.num_rows < batch_size:
                break
            if stopping():
                log.info("stopping after this batch: the rest ships at the next run")
                break


def _count_rows(
    repo: Repository,
    source: SourceDialect,
    record: OffloadedTable,
    state: IncrementalState,
    result: ExtractionResult,
) -> RowCounts | None:
    """The rows a run compares where the capture cannot see a TRUNCATE.

    See ``gluon.extract.truncation``.

    A run that shipped nothing reuses the lake bound of the last counted run of this
    enablement (none yet: nothing is compared); it reads no Delta log.
    """
    lake_rows = None
    if not result.rows_read:
        runs = repo.incremental.extraction_runs(record.table_key, enablement_id=state.enablement_id)
        lake_rows = last_lake_rows(runs)
        if lake_rows is None:
            return None
    return count_rows(source, record, state, lake_rows=lake_rows)


def _never() -> bool:
    return False


@dataclass(slots=True)
class _AppendToDeltaTable:
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
class _MergeImmediately:
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
        under a reset sequence (removing it would lose it; ``_shipped_before`` refuses it).
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
    skip = _shipped_before(lake, feed, state, changes)
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


@dataclass(frozen=True, slots=True)
class _Resent:
    batch: BatchRange
    """Where the engine finds the changes to leave out."""
    fresh: int
    """Changes of the batch no run shipped yet."""


def _shipped_before(
    lake: Callable[[], LakeSession], feed: ChangeFeed, state: IncrementalState, changes: pa.Table
) -> _Resent | None:
    """Which changes of ``changes`` a previous, interrupted run already committed to the lake
    (None: none of them).

    A change is recognised by its ``gl_seq`` together with the run that shipped
    it: only runs that may have left their shipped changes in the changelog
    count (see ``unconfirmed_extractions``). The same ``gl_seq`` shipped by a
    run that completed means the changelog handed a value out twice (its
    sequence was reset, or another table writes to it): refused, never skipped.
    The engine matches the batch against the delta table; the driver sees one row
    per run that shipped some of it.

    Raises:
        StateError: a change reuses the ``gl_seq`` of a change already shipped.
    """
    import pyarrow.compute as pc

    if not feed.sequences_are_unique:
        return None
    seqs = changes.column("gl_seq")
    low, high = pc.min(seqs).as_py(), pc.max(seqs).as_py()
    # Strictly above: the change AT shipped_seq is the last one a run recorded as shipping,
    # maybe committed by a run killed right after (a one-change batch is exactly that).
    if low > _highest_ever_shipped(feed, state):
        return None  # the usual case after a table's first batch, proved without the engine
    if not delta_row_count(
        state.delta_path, column=PARTITION_COLUMN, at_least=state.view_min_partition
    ):
        return None  # no live change to match (a first batch): proved without the engine
    batch = BatchRange(state.delta_table, low, high, state.view_min_partition)
    runs = shipped_by_run(lake(), batch, seqs.combine_chunks())
    if not runs:
        return None
    unconfirmed = feed.repo.incremental.unconfirmed_extractions(state.table_key)
    reused = [run for run in runs if run.extraction_id not in unconfirmed]
    if reused:
        first = min(run.first_seq for run in reused)
        last = max(run.last_seq for run in reused)
        raise StateError(
            f"the changelog of {state.table_key} holds {sum(run.changes for run in reused)} "
            f"changes whose gl_seq (first {first}) belongs to a change already shipped: its "
            "sequence was reset or another table writes to it; extraction stopped before them. "
            f"Restart the sequence above {state.shipped_seq or last} and {REBUILD_HINT}"
        )
    return _Resent(batch, changes.num_rows - sum(run.changes for run in runs))


def _highest_ever_shipped(feed: ChangeFeed, state: IncrementalState) -> int | float:
    """An upper bound of the ``gl_seq`` of every change in the delta table (infinity: none
    known).

    Every write of changes to the delta table raises the repository's ``shipped_seq`` to
    the batch's highest ``gl_seq`` first (``feed.shipping``), and nothing lowers it, so no
    change above it can be in the lake. Read again for each batch: a lost commit race
    retries a batch whose first commit may have landed, and its ``shipping`` raised the
    value. None, for an enablement that never shipped or a repository from before the
    column, proves nothing.
    """
    current = feed.repo.incremental.get_state(state.table_key)
    shipped = None if current is None else current.shipped_seq
    return math.inf if shipped is None else shipped


def extraction_plan(
    settings: Settings, ref: TableRef, *, batch_size: int | None = None
) -> list[tuple[str, str]]:
    """What an extraction of ``ref`` would do now, as (step name, description); changes nothing.

    Raises:
        StateError: incremental update is not enabled.
    """
    repo = Repository(settings.repo_url)
    record, state = repo.enabled_table(ref.key, otherwise=NOT_ENABLED_HINT)
    running = locks.holder(repo, ref.key, locks.EXTRACTION)
    if running is not None:
        return [("refused", f"nothing: a running {locks.describe(running)} holds the table")]
    method = get_method(state.method)
    feed = FEEDS[method.change_reader](sources.connect_configured(settings), record, state, repo)
    pending = feed.pending()
    if pending == 0:
        return [("nothing_to_do", f"nothing to extract: no changes of {ref.key} are captured")]
    partition = state.ingestion_partition
    changes = "the captured changes" if pending is None else f"{pending} captured changes"
    batch_size = batch_size or default_batch_size(MergeMode(state.merge_mode or MergeMode.DEFERRED))
    steps = [
        ("read", f"read {changes} of {ref.key}, lowest gl_seq first, {batch_size} per batch"),
        (
            (
                "merge",
                f"stage each batch in {state.delta_table}, then merge it into the base table "
                f"{record.base_path} (the latest change per key; insert-only methods append), "
                "one Delta commit per batch recording it, so a re-run never applies it twice",
            )
            if state.merge_mode == MergeMode.IMMEDIATE
            else (
                "append",
                f"append them to {state.delta_table} (control partition {partition}), one "
                "Delta commit per batch, skipping any already there",
            )
        ),
        ("done", f"mark them shipped: {feed.marks_shipped}"),
    ]
    if state.diverting:
        steps.append(
            (
                "acknowledge",
                f"acknowledge change ingestion diversion to control partition {partition} "
                "(the waiting compaction goes on)",
            )
        )
    return steps
