"""Bisection: compare both sides' bucket checksums, split only the buckets that differ,
and read whole only the rows of small differing buckets.

Each level splits a differing bucket into 16 to 4096 (one to three more hex digits of the
key's hash), chosen so the next buckets hold about :data:`TARGET_ROWS` rows; a bucket of
at most :data:`LEAF_ROWS` rows on both sides (or a full hash) is read whole on both sides.
An equal table costs one count and one checksum pass on each side.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gluon.verify.checksums import Checksum

log = logging.getLogger(__name__)

LEAF_ROWS = 64
"""A differing bucket of at most this many rows is read whole (rows, not checksums)."""
TARGET_ROWS = 8
"""Rows a bucket is meant to hold after a split (few rows read whole per difference)."""
MAX_STEP = 3
"""At most this many hex digits more per level (4096 buckets: the checksum rows stay small)."""
HASH_DIGITS = 32


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


def step_for(rows: int) -> int:
    """Hex digits to add so that ``rows`` split into buckets of about TARGET_ROWS."""
    if rows <= TARGET_ROWS:
        return 1
    return max(1, min(MAX_STEP, math.ceil(math.log(rows / TARGET_ROWS, 16))))


def narrow(
    source: Side, lake: Side, progress: Callable[[int, int], None] | None = None
) -> Narrowed:
    """Bisect until the differing buckets are small, and read their rows on both sides."""
    result = Narrowed()
    total = max(source.count(), lake.count())
    result.rows_compared = total
    parents: list[str] = []
    parent_digits = 0
    spread = total  # the most rows a differing parent holds
    leaves: dict[int, list[str]] = {}
    while True:
        digits = min(HASH_DIGITS, parent_digits + step_for(spread))
        ours = source.buckets(digits, parent_digits, parents)
        theirs = lake.buckets(digits, parent_digits, parents)
        result.levels += 1
        differing = sorted(b for b in ours.keys() | theirs.keys() if ours.get(b) != theirs.get(b))
        if progress is not None:
            progress(result.levels, len(differing))
        sizes = {b: max(ours.get(b, (0, 0, 0))[0], theirs.get(b, (0, 0, 0))[0]) for b in differing}
        small = [b for b in differing if sizes[b] <= LEAF_ROWS or digits >= HASH_DIGITS]
        if small:
            leaves.setdefault(digits, []).extend(small)
        parents = [b for b in differing if b not in set(small)]
        if not parents:
            break
        spread = max(sizes[b] for b in parents)
        parent_digits = digits
        log.debug("verify: %d buckets of %d digits differ; splitting", len(parents), digits)
    for digits, buckets in sorted(leaves.items()):
        result.leaf_buckets += len(buckets)
        result.source_rows += source.rows(digits, buckets)
        result.lake_rows += lake.rows(digits, buckets)
    return result
