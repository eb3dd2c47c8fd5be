"""Bisection: compare both sides' bucket checksums, split only the buckets that differ,
and read whole only the rows of small differing buckets.

The first level cuts the table into buckets of about :data:`FIRST_LEVEL_ROWS` rows (so its
checksum rows are a small fraction of the table's bytes); each next level splits only the
differing buckets, into 16 to 4096 (one to three more hex digits of the key's hash, or of an
integer key: :mod:`gluon.verify.buckets`), until a bucket holds at most :data:`LEAF_ROWS`
rows on both sides (or all the digits are used): its rows are then read whole on both
sides. An equal table costs one checksum pass on each side (and, to size the first level,
the source's estimate of its rows: PostgreSQL's planner's, a count elsewhere); the source's
first pass can start before the lake's engine is up (:class:`HeadStart`).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

from gluon.verify.buckets import HASH_DIGITS
from gluon.verify.checksums import Checksum

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_LEVEL_ROWS = 1024
"""Rows per bucket aimed at by the first pass over the whole table."""
LEAF_ROWS = 64
"""A differing bucket of at most this many rows is read whole (rows, not checksums)."""
MAX_STEP = 3
"""At most this many hex digits more per level (4096 buckets: the checksum rows stay small)."""


class Side(Protocol):
    def count(self) -> int: ...

    def buckets(
        self, digits: int, parent_digits: int, parents: Sequence[str]
    ) -> dict[str, Checksum]: ...

    def rows(self, digits: int, buckets: Sequence[str]) -> list[list[Any]]: ...


@dataclass
class Narrowed:
    """What the bisection read: both sides' rows of the differing buckets."""

    source_rows: list[list[Any]] = field(default_factory=list)
    lake_rows: list[list[Any]] = field(default_factory=list)
    rows_compared: int = 0
    levels: int = 0
    leaf_buckets: int = 0
    leaves: dict[int, list[str]] = field(default_factory=dict)
    """The buckets read whole, by their length in hex digits (a later look re-reads them)."""


@dataclass
class Checkpoint:
    """Where a bisection stands after a level: what a rerun after a kill starts from."""

    rows_compared: int
    levels: int
    parent_digits: int
    parents: list[str]
    """The differing buckets the next level splits."""
    spread: int
    leaves: dict[int, list[str]]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Checkpoint:
        data = json.loads(text)
        data["leaves"] = {int(digits): buckets for digits, buckets in data["leaves"].items()}
        return cls(**data)


def both(on_source: Callable[[], T], on_lake: Callable[[], T]) -> tuple[T, T]:
    """Run the source's query in a thread while the lake's runs here: each engine works on
    its own side at the same time (a verify takes the longer of the two, not their sum)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-source") as pool:
        ours = pool.submit(on_source)
        theirs = on_lake()
        return ours.result(), theirs


def step_for(rows: int, target: int) -> int:
    """Hex digits to add so that ``rows`` split into buckets of no fewer than ``target`` rows
    (at least one digit, at most MAX_STEP)."""
    if rows <= target:
        return 1
    return max(1, min(MAX_STEP, math.floor(math.log(rows / target, 16))))


def first_digits(rows: int, full_digits: int) -> int:
    """Hex digits of the first level's buckets for a table of ``rows`` rows."""
    return min(full_digits, step_for(rows, FIRST_LEVEL_ROWS))


class HeadStart:
    """The source's count and first level over the whole table, started in a thread at once
    (while the lake's engine starts), and handed to :func:`narrow` when it asks for them;
    every other call goes to the source side itself."""

    def __init__(self, side: Side, full_digits: int) -> None:
        self.side = side
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-head-start")
        self._count = self._pool.submit(side.count)
        self._first: Future[tuple[int, dict[str, Checksum]]] | None = self._pool.submit(
            self._first_level, full_digits
        )

    def _first_level(self, full_digits: int) -> tuple[int, dict[str, Checksum]]:
        digits = first_digits(self._count.result(), full_digits)
        return digits, self.side.buckets(digits, 0, [])

    def count(self) -> int:
        return self._count.result()

    def buckets(
        self, digits: int, parent_digits: int, parents: Sequence[str]
    ) -> dict[str, Checksum]:
        first, self._first = self._first, None
        if first is not None and not parents:
            done_digits, found = first.result()
            if done_digits == digits:
                return found
        return self.side.buckets(digits, parent_digits, parents)

    def rows(self, digits: int, buckets: Sequence[str]) -> list[list[Any]]:
        return self.side.rows(digits, buckets)

    def close(self) -> None:
        """Wait for the thread (a failed lake side leaves nothing else running)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def narrow(
    source: Side,
    lake: Side,
    progress: Callable[[int, int], None] | None = None,
    recheck: dict[int, list[str]] | None = None,
    start: Checkpoint | None = None,
    checkpoint: Callable[[Checkpoint], None] | None = None,
    full_digits: int = HASH_DIGITS,
) -> Narrowed:
    """Bisect until the differing buckets are small, and read their rows on both sides.

    ``recheck``: the buckets an earlier look read whole: only they are read again (a look
    after an extraction confirms the differences found, it does not search again).
    ``start``: the levels an earlier run finished (it was killed after them); ``checkpoint``
    is called after each level that leaves buckets to split. ``full_digits``: the digits at
    which a bucket holds one key (:func:`gluon.verify.buckets.full_digits`)."""
    result = Narrowed()
    if recheck is not None:
        return _read_leaves(source, lake, recheck, result)
    whole_table = start is None  # the first level's counts are both sides' row counts
    if start is None:
        total = source.count()  # the lake's is the sum of its first level's counts
        start = Checkpoint(total, 0, 0, [], total, {})
        target = FIRST_LEVEL_ROWS
    else:
        target = LEAF_ROWS
        log.info("verify: resuming after level %d", start.levels)
    result.rows_compared = start.rows_compared
    result.levels = start.levels
    parents = list(start.parents)
    parent_digits = start.parent_digits
    spread = start.spread  # the most rows a differing parent holds
    leaves = {digits: list(buckets) for digits, buckets in start.leaves.items()}
    while True:
        digits = min(full_digits, parent_digits + step_for(spread, target))
        target = LEAF_ROWS
        ours, theirs = both(
            partial(source.buckets, digits, parent_digits, parents),
            partial(lake.buckets, digits, parent_digits, parents),
        )
        result.levels += 1
        if whole_table:
            whole_table = False
            result.rows_compared = max(_rows(ours), _rows(theirs))
        differing = sorted(b for b in ours.keys() | theirs.keys() if ours.get(b) != theirs.get(b))
        if progress is not None:
            progress(result.levels, len(differing))
        sizes = {b: max(ours.get(b, (0, 0, 0))[0], theirs.get(b, (0, 0, 0))[0]) for b in differing}
        small = [b for b in differing if sizes[b] <= LEAF_ROWS or digits >= full_digits]
        if small:
            leaves.setdefault(digits, []).extend(small)
        parents = [b for b in differing if b not in set(small)]
        if not parents:
            break
        spread = max(sizes[b] for b in parents)
        parent_digits = digits
        if checkpoint is not None:
            checkpoint(
                Checkpoint(result.rows_compared, result.levels, digits, parents, spread, leaves)
            )
        log.debug("verify: %d buckets of %d digits differ; splitting", len(parents), digits)
    return _read_leaves(source, lake, leaves, result)


def _rows(found: dict[str, Checksum]) -> int:
    return sum(checksum[0] for checksum in found.values())


def _read_leaves(
    source: Side, lake: Side, leaves: dict[int, list[str]], result: Narrowed
) -> Narrowed:
    result.leaves = leaves
    for digits, buckets in sorted(leaves.items()):
        result.leaf_buckets += len(buckets)
        read = both(partial(source.rows, digits, buckets), partial(lake.rows, digits, buckets))
        result.source_rows += read[0]
        result.lake_rows += read[1]
    return result
