"""``--max-rows-per-second``: read the source no faster than a rate, so the application
does not feel the verify (it sleeps between batches; the source holds no lock meanwhile
beyond the reading statement's snapshot)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

BATCHES_PER_SECOND = 10
"""Batches a paced read is cut into per second of its rate: short sleeps, an even load."""


@dataclass
class Pace:
    """Sleeps after each batch until the rows read so far fit ``rows_per_second``."""

    rows_per_second: int | None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    rows: int = 0
    started: float | None = field(default=None)

    def batch_rows(self, default: int) -> int:
        if self.rows_per_second is None:
            return default
        return max(1, min(default, self.rows_per_second // BATCHES_PER_SECOND))

    def read(self, rows: int) -> None:
        """``rows`` more were read: wait until they are within the rate."""
        if self.rows_per_second is None:
            return
        if self.started is None:
            self.started = self.clock()
        self.rows += rows
        due = self.started + self.rows / self.rows_per_second
        wait = due - self.clock()
        if wait > 0:
            self.sleep(wait)
