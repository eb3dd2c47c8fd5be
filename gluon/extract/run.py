"""Extraction: ship the captured changes into the lake's delta table, exactly once.

Per batch: read the changes visible now (lowest ``gl_seq`` first), drop those
already in the delta table (a previous run that died after its Delta commit),
append the rest in one Delta commit, then delete exactly the rows read from
the changelog. A crash between any two steps is repaired by the next run:
rows still in the changelog are read again and the ones already committed to
the lake are skipped by their ``gl_seq``.

When a compaction has requested change ingestion diversion, the run writes to
the requested control partition and acknowledges it when it finishes.

This module holds the run and its batch loop (``run_extraction``, ``_ship``); the two ways a
batch ships are ``gluon.extract.shipping``'s, the already-shipped check
``gluon.extract.already_shipped``'s, what a run did ``gluon.extract.result``'s and the plan of
a run without ``-x`` ``gluon.extract.plan``'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING

from gluon import source as sources
from gluon.capture import changelog, existing
from gluon.config import Settings
from gluon.errors import GluonError, StateError, UsageError
from gluon.extract.counting import BatchCounter
from gluon.extract.feeds import ChangeFeed, capture_objects, feed_of
from gluon.extract.insert_only import Screen
from gluon.extract.result import ExtractionResult
from gluon.extract.schema_changes import carry_changes
from gluon.extract.shipping import AppendToDeltaTable, MergeImmediately
from gluon.extract.truncation import RowCounts, count_rows, counts_rows, last_lake_rows
from gluon.faults import fault_point
from gluon.lake import tables
from gluon.lake.session import LakeOpener, LakeSession, lake_opener
from gluon.lake.storage import missing_delta_table_error
from gluon.locks import extraction_lock
from gluon.methods import get_method
from gluon.methods.base import ViewKind
from gluon.naming import TableRef
from gluon.progress import NullProgress, Progress, timed_step
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.incremental import IncrementalState
from gluon.states import ExtractionStatus, MergeMode

if TYPE_CHECKING:
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
        feed = feed_of(state)(sources.connect_configured(settings), record, state, repo)
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
        feed: ChangeFeed = feed_of(state)(source, record, state, repo)
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
            MergeImmediately(lake, feed, record, state, result, counter)
            if state.merge_mode == MergeMode.IMMEDIATE
            else AppendToDeltaTable(lake, feed, record, state, result)
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
