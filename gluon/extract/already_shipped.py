"""The already-shipped check: which changes of a batch an interrupted run committed to the
delta table already (``shipped_before``), proved without the engine when the batch lies above
the highest ``gl_seq`` ever shipped, and refused when a completed run shipped the same ``gl_seq``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gluon.errors import StateError
from gluon.extract.feeds import REBUILD_HINT, ChangeFeed
from gluon.lake.changes import PARTITION_COLUMN, BatchRange, shipped_by_run
from gluon.lake.session import LakeSession
from gluon.lake.storage import delta_row_count
from gluon.repo.incremental import IncrementalState

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True, slots=True)
class _Resent:
    batch: BatchRange
    """Where the engine finds the changes to leave out."""
    fresh: int
    """Changes of the batch no run shipped yet."""


def shipped_before(
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
