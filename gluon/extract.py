"""Extraction: ship the captured changes into the lake's delta table, exactly once.

Per batch: read the changes visible now (lowest ``gl_seq`` first), drop those
already in the delta table (a previous run that died after its Delta commit),
append the rest in one Delta commit, then delete exactly the rows read from
the changelog. A crash between any two steps is repaired by the next run:
rows still in the changelog are read again and the ones already committed to
the lake are skipped by their ``gl_seq``.

When a compaction has requested change ingestion diversion, the run writes to
the requested control partition and acknowledges it when it finishes.
"""

from __future__ import annotations

import logging
import time
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from gluon import capture, locks
from gluon import source as sources
from gluon.config import Settings
from gluon.errors import GluonError, StateError, UsageError
from gluon.faults import fault_point
from gluon.feeds import FEEDS, REBUILD_HINT, ChangeFeed, capture_objects
from gluon.insert_only import Screen
from gluon.lake import tables
from gluon.lake.changes import BatchRange, append_changes, shipped_by_run, without_shipped
from gluon.lake.session import LakeSession, open_session, retry_commit
from gluon.locks import extraction_lock
from gluon.methods import get_method
from gluon.methods.base import ViewKind
from gluon.naming import TableRef
from gluon.progress import NullProgress, Progress
from gluon.repo import OffloadedTable, Repository
from gluon.repo.common import now
from gluon.repo.incremental import IncrementalState
from gluon.schema_changes import carry_changes
from gluon.states import ExtractionStatus

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 100_000
MAX_BATCH_SIZE = 2**31 - 1
"""The largest batch every source's LIMIT/FETCH FIRST and the DBAPI fetch size accept."""


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
    """Insert-only methods: what kept changes out of the lake (``gluon.insert_only``)."""


NOT_ENABLED_HINT = (
    "enable it with --incremental-updates-enabled --incremental-extraction-method=METHOD"
)


def run_extraction(
    settings: Settings,
    ref: TableRef,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> ExtractionResult:
    """Extract the changes of ``ref`` (holding its extraction lock).

    Raises:
        LockHeldError: another extraction, or a lifecycle command other than a compaction,
            is running on the table.
        StateError: incremental update is not enabled.
    """
    started = time.monotonic()
    repo = Repository(settings.repo_url)
    repo.enabled_table(ref.key, otherwise=NOT_ENABLED_HINT)
    with extraction_lock(settings, ref.key, repo=repo):
        record, state = repo.enabled_table(ref.key, otherwise=NOT_ENABLED_HINT)  # under the lock
        method = get_method(state.method)
        source = sources.connect_configured(settings)
        record = carry_changes(settings, source, repo, record, state)
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
        if method.view_kind is ViewKind.UNION_ALL:
            result.screen = Screen(repo, ref.key, method.name)
        try:
            problems = capture.capture_problems(source, record.spec(), capture_objects(state))
            if any(problem.startswith("changelog table") for problem in problems):
                raise CaptureBrokenError("; ".join(problems))  # nothing to read: a failed run
            _ship(settings, feed, record, state, result, batch_size, progress or NullProgress())
        except BaseException as exc:
            repo.incremental.finish_extraction(
                result.run_id,
                status=ExtractionStatus.FAILED,
                message=str(exc)[:2000],
                rows_read=result.rows_read,
                rows_written=result.rows_written,
            )
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
        repo.incremental.finish_extraction(
            result.run_id,
            status=ExtractionStatus.SUCCESS,
            rows_read=result.rows_read,
            rows_written=result.rows_written,
            min_seq=result.min_seq,
            max_seq=result.max_seq,
            control_partition=partition,
        )
    result.seconds = time.monotonic() - started
    if problems:
        # What was captured is in the lake now; the operator must hear that capture stopped.
        raise CaptureBrokenError(f"shipped {result.rows_read} changes, but " + "; ".join(problems))
    return result


def _ship(
    settings: Settings,
    feed: ChangeFeed,
    record: OffloadedTable,
    state: IncrementalState,
    result: ExtractionResult,
    batch_size: int,
    progress: Progress,
) -> None:
    feed.verify()
    pending = feed.pending()
    if pending == 0:
        log.info("no changes to extract for %s", record.table_key)
        return
    import pyarrow.compute as pc  # only when there are changes to ship

    with ExitStack() as stack:
        session: LakeSession | None = None
        task = stack.enter_context(progress.task(f"extracting {record.table_key}", pending))
        while True:
            changes = feed.read(batch_size)
            if changes.num_rows == 0:
                break
            if session is None:
                session = stack.enter_context(open_session(settings))
                tables.register_table(session, state.delta_table, state.delta_path)
            fresh = retry_commit(partial(_append, session, feed, record, state, result, changes))
            fault_point("extract.after_delta_commit")
            feed.done(changes)
            result.rows_read += changes.num_rows
            result.rows_written += fresh
            seqs = changes.column("gl_seq")
            low, high = pc.min(seqs).as_py(), pc.max(seqs).as_py()
            result.min_seq = low if result.min_seq is None else min(result.min_seq, low)
            result.max_seq = high if result.max_seq is None else max(result.max_seq, high)
            task.advance(changes.num_rows)
            log.info(
                "shipped %d changes (%d already in the lake) to control partition %d",
                changes.num_rows,
                changes.num_rows - fresh,
                result.control_partition,
            )
            if changes.num_rows < batch_size:
                break


def _append(
    session: LakeSession,
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
    skip = _shipped_before(session, feed, state, changes)
    fresh = changes.num_rows if skip is None else skip.fresh
    if fresh:
        # The highest gl_seq of the batch: a change an interrupted run shipped already was
        # recorded by that run, so this never records more than what is about to ship.
        feed.shipping(changes)
    if result.screen is not None:
        # The screen looks at the rows themselves: the engine filters them first.
        if skip is not None:
            changes = without_shipped(session, record.columns, changes, skip.batch)
            skip = None
        changes = result.screen(session, changes)
        fresh = changes.num_rows
    fault_point("extract.before_delta_commit")
    if fresh:
        append_changes(
            session,
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
    session: LakeSession, feed: ChangeFeed, state: IncrementalState, changes: pa.Table
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
    batch = BatchRange(state.delta_table, low, high, state.view_min_partition)
    runs = shipped_by_run(session, batch, seqs.combine_chunks())
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


def extraction_plan(
    settings: Settings, ref: TableRef, *, batch_size: int = DEFAULT_BATCH_SIZE
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
    steps = [
        ("read", f"read {changes} of {ref.key}, lowest gl_seq first, {batch_size} per batch"),
        (
            "append",
            f"append them to {state.delta_table} (control partition {partition}), one Delta "
            "commit per batch, skipping any already there",
        ),
        ("done", "mark them shipped in the source (the changelog rows read are deleted)"),
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
