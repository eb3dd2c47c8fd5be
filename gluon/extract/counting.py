"""Counting what an extraction takes from the source, exactly once, whatever kills it.

A batch is counted after it is in the lake and before the source lets go of it (the
changelog rows deleted, the slot advanced): the run's counts and the batch's ``gl_seq``
ranges are written to its repository row in one statement (``count_batch``). A run killed
after the source let go of a batch has counted it already; a run killed before the count
leaves the batch in the source, and the next run counts it when it reads it again. Between
the count and the source letting go, the batch is in the source *and* counted: the next run
reads it again and leaves out of its count every change in the ranges an unconfirmed run
(one after the last success) counted last (``counted_unconfirmed``).

A feed whose changes share no unique ``gl_seq`` (ORA_ROWSCN re-reads row images) counts
every batch it reads: a row image read again after a kill is counted again.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gluon.capture.changelog import sequence_runs
from gluon.repo import Repository

if TYPE_CHECKING:
    import pyarrow as pa

    from gluon.extract.result import ExtractionResult


@dataclass(slots=True)
class BatchCounter:
    """Counts the batches of one run (see the module docstring)."""

    repo: Repository
    result: ExtractionResult
    unique_sequences: bool
    """Each change has its own ``gl_seq``: a batch read again can be recognised."""
    batches_in_order: bool
    """Every change read after a batch has a higher ``gl_seq`` than the batch's (a slot's
    stream, in commit order): a batch's ranges are its lowest and highest ``gl_seq``."""
    _before: tuple[list[int], list[int]] | None = field(default=None, init=False)
    """The ranges unconfirmed runs counted last (lows, highs), read at the first batch."""

    def count(self, changes: pa.Table, written: int) -> None:
        """Count ``changes`` (``written`` of them went into the lake) as taken by this run,
        leaving out those a killed run counted already; record it before the source lets go
        of them."""
        import pyarrow.compute as pc

        seqs = changes.column("gl_seq")
        ranges: list[tuple[int, int]] | None = None
        counted_before = 0
        if self.unique_sequences:
            if self.batches_in_order:
                ranges = [(pc.min(seqs).as_py(), pc.max(seqs).as_py())]
            else:
                ranges = sequence_runs(seqs)
            counted_before = self._counted_before(seqs)
        result = self.result
        result.took(changes, written, counted_before=counted_before)
        self.repo.incremental.count_batch(
            result.run_id,
            rows_read=result.rows_read,
            rows_written=result.rows_written,
            min_seq=result.min_seq,
            max_seq=result.max_seq,
            counted_seqs=ranges,
        )

    def _counted_before(self, seqs: pa.ChunkedArray) -> int:
        """How many of ``seqs`` lie in the ranges unconfirmed runs counted last."""
        if self._before is None:
            ranges = self.repo.incremental.counted_unconfirmed(
                self.result.table_key, self.result.run_id
            )
            merged: list[list[int]] = []
            for low, high in ranges:  # ascending; two runs' ranges may overlap
                if merged and low <= merged[-1][1] + 1:
                    merged[-1][1] = max(merged[-1][1], high)
                else:
                    merged.append([low, high])
            self._before = ([low for low, _ in merged], [high for _, high in merged])
        lows, highs = self._before
        if not lows:
            return 0  # the usual case: no run was killed since the last success
        found = 0
        for seq in seqs.to_pylist():
            at = bisect.bisect_right(lows, seq) - 1
            found += at >= 0 and seq <= highs[at]
        return found
