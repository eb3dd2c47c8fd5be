"""One look at a table: checksums on both sides, bisection of the differing buckets, and
the rows of the small differing buckets grouped by key for :func:`gluon.verify.compare.diff`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from gluon.config import Settings
from gluon.repo import OffloadedTable, Repository
from gluon.verify.bisect import Checkpoint, HeadStart, Side, narrow
from gluon.verify.buckets import full_digits, residue_key
from gluon.verify.checksums import Meter, SourceSide, lake_side, text_kind
from gluon.verify.pace import Pace
from gluon.verify.sides import Rows, Shape

log = logging.getLogger(__name__)


@dataclass
class Look:
    source: Rows
    lake: Rows
    rows_compared: int
    buckets_compared: int
    leaf_buckets: int
    leaves: dict[int, list[str]]


def look(
    settings: Settings,
    repo: Repository,
    record: OffloadedTable,
    shape: Shape,
    pace: Pace,
    meter: Meter,
    progress: Callable[[int, int], None] | None = None,
    recheck: dict[int, list[str]] | None = None,
    start: Checkpoint | None = None,
    checkpoint: Callable[[Checkpoint], None] | None = None,
) -> Look:
    """Compare both sides by checksums; read whole only the rows of differing buckets."""
    kinds = [
        text_kind(column, index in shape.json_positions)
        for index, column in enumerate(shape.columns)
    ]
    by_residue = residue_key(shape.columns, kinds, shape.key_positions)
    source = SourceSide.open(
        settings, repo, record, kinds, shape.key_positions, pace, meter, by_residue
    )
    compared_before = meter.buckets_compared

    def level_done(level: int, differing: int) -> None:
        # One line per level for -v and the log file; the bar (if any) moves by the level.
        nonlocal compared_before
        compared = meter.buckets_compared - compared_before
        compared_before = meter.buckets_compared
        log.info(
            "%s: level %d: %d buckets compared, %d differ",
            record.table_key,
            level,
            compared,
            differing,
        )
        if progress is not None:
            progress(level, differing)

    keys = shape.key_positions
    digits = full_digits(by_residue)
    # A whole search: the source's first pass runs while the lake's engine starts.
    head_start = HeadStart(source, digits) if recheck is None and start is None else None
    source_side: Side = head_start or source
    try:
        with lake_side(settings, repo, record, kinds, keys, meter, by_residue) as lake:
            narrowed = narrow(source_side, lake, level_done, recheck, start, checkpoint, digits)
    finally:
        if head_start is not None:
            head_start.close()
    log.info(
        "%s: %d rows, %d buckets compared in %d levels, %d read whole; %d bytes moved from "
        "the source",
        record.table_key,
        narrowed.rows_compared,
        meter.buckets_compared,
        narrowed.levels,
        narrowed.leaf_buckets,
        meter.source_bytes,
    )
    return Look(
        source=shape.group(narrowed.source_rows),
        lake=shape.group(narrowed.lake_rows),
        rows_compared=narrowed.rows_compared,
        buckets_compared=meter.buckets_compared,
        leaf_buckets=narrowed.leaf_buckets,
        leaves=narrowed.leaves,
    )
