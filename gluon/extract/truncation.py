"""TRUNCATE where the capture cannot see one: compare row counts at extraction.

PostgreSQL records a TRUNCATE as a change (``gl_op`` 'T': a statement trigger, or
test_decoding's TRUNCATE record), and the lake applies it. SQLite has no TRUNCATE; Oracle's
row triggers do not fire on one, and ORA_ROWSCN reads the table itself. For those, and a
merging view, each extraction counts the source table's rows when it ends, and the fewest
rows the lake can show once every change waiting then is applied: the base table's rows
(from its Delta log), less one per change in the delta table's live partitions and per
change waiting in the changelog (a change removes at most one row). The run records both;
status and the report say the source may have been truncated when the source holds fewer.

A lower bound, so never a false alarm from changes in flight: exact right after a
compaction (and in merge mode IMMEDIATE), weaker as changes pile up. Its cost is one
``COUNT(*)`` of the source table per extraction, on those dialects and methods only.
"""

from __future__ import annotations

from dataclasses import dataclass

from gluon.capture import changelog
from gluon.extract.feeds import capture_objects
from gluon.lake.sql import CONTROL_PARTITION
from gluon.lake.stats import delta_stats
from gluon.methods import get_method
from gluon.methods.base import ViewKind
from gluon.repo import OffloadedTable
from gluon.repo.incremental import ExtractionRun, IncrementalState
from gluon.source.base import SourceDialect
from gluon.states import MergeMode


@dataclass(frozen=True, slots=True)
class RowCounts:
    """What an extraction compared: the source's rows, and the fewest the lake can show."""

    source_rows: int
    lake_rows: int

    @property
    def dropped(self) -> bool:
        return self.source_rows < self.lake_rows

    def warning(self, table: str, when: str) -> str:
        """The line status, the report and the extraction show when :attr:`dropped`."""
        return (
            f"the source may have been truncated: {when} {table} held {self.source_rows} "
            f"rows, fewer than the {self.lake_rows} the lake shows at least, and its capture "
            "records no TRUNCATE (docs/operations.md, 'TRUNCATE'); if rows were removed, "
            "re-offload with --reset-backend-table"
        )


def counts_rows(source: SourceDialect, state: IncrementalState) -> bool:
    """Whether extractions of the table compare row counts: a merging view whose capture
    cannot see a TRUNCATE (insert-only methods report deletes their own way)."""
    method = get_method(state.method)
    sees = source.captures_truncate and method.sees_truncate
    return method.view_kind is ViewKind.MERGE and not sees


def count_rows(
    source: SourceDialect,
    record: OffloadedTable,
    state: IncrementalState,
    *,
    lake_rows: int | None = None,
) -> RowCounts:
    """The source's rows now, and the fewest the lake can show once the changes waiting now
    are applied. The source is counted first: a change made after it is in the changelog.

    ``lake_rows``: the bound an earlier run of this enablement recorded, for a run that
    shipped nothing since (the lake only grew by compactions then); the Delta logs are not
    read, so a no-op run loads no Delta library.
    """
    source_rows = source.count_rows(record.spec())
    waiting = changelog.count_changes(source, capture_objects(state))
    if lake_rows is None:
        lake_rows = delta_stats(record.base_path).rows
        if state.merge_mode != MergeMode.IMMEDIATE:  # the staging table holds a merged batch
            partitions = delta_stats(
                state.delta_path, partition_column=CONTROL_PARTITION
            ).partitions
            lake_rows -= sum(
                part.rows
                for part in partitions
                if part.value is not None and int(part.value) >= state.view_min_partition
            )
    return RowCounts(source_rows, max(lake_rows - waiting, 0))


def last_lake_rows(runs: list[ExtractionRun]) -> int | None:
    """The lake bound the newest counted run of ``runs`` (newest first) recorded."""
    return next((run.lake_rows for run in runs if run.lake_rows is not None), None)


def truncation_note(runs: tuple[ExtractionRun, ...], table: str) -> str | None:
    """What status says when the newest counted run (``runs`` newest first) found the
    source holding fewer rows than the lake shows (None: it did not, or none counted)."""
    counted = next((run for run in runs if run.source_rows is not None), None)
    if counted is None or counted.lake_rows is None:
        return None
    counts = RowCounts(counted.source_rows or 0, counted.lake_rows)
    if not counts.dropped:
        return None
    finished = f"{counted.finished_at:%Y-%m-%d %H:%M:%S}" if counted.finished_at else "?"
    return counts.warning(table, f"at {finished} (extraction run {counted.id})")
