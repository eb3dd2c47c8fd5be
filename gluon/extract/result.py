"""What an extraction run did: ``ExtractionResult``, its counts, ``gl_seq`` range and the
lines it shows (``summary``, ``shown``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gluon.extract.insert_only import Screen
from gluon.extract.truncation import RowCounts
from gluon.progress import ShownLine
from gluon.states import MergeMode

if TYPE_CHECKING:
    import pyarrow as pa


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
