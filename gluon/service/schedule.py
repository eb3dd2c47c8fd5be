"""When each table's extraction and compaction are due: pure functions of a clock.

Every time here is naive UTC, the repository's clock (``gluon.repo.common.now``). The
service reads the starting point from the repository's last runs (so a restarted
service carries on where it stopped) and then keeps the due times in memory.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from gluon.service.config import TableConfig
from gluon.service.config_values import Window


class Action(StrEnum):
    EXTRACTION = "extraction"
    COMPACTION = "compaction"
    VERIFY = "verify"


@dataclass(frozen=True, slots=True)
class LastRuns:
    """What the repository says about a table's latest runs."""

    extraction_started: dt.datetime | None = None
    compaction_started: dt.datetime | None = None
    """The latest compaction run that completed."""
    compaction_unfinished: bool = False
    """A compaction run is open (failed or interrupted): the next one resumes it."""
    verified: dt.datetime | None = None
    """When the latest ``gluon verify`` of the table ended (by the service or a command)."""


@dataclass(slots=True)
class TableSchedule:
    table: TableConfig
    next_extraction: dt.datetime
    last_compaction: dt.datetime | None
    compaction_unfinished: bool
    next_compaction_attempt: dt.datetime
    """No compaction attempt before this (after one failed, found nothing, or met a lock)."""
    last_verify: dt.datetime | None = None
    next_verify_attempt: dt.datetime | None = None
    """No verify attempt before this (after one failed or met a lock)."""

    @classmethod
    def start(cls, table: TableConfig, last: LastRuns, now: dt.datetime) -> TableSchedule:
        """The schedule of a table when the service starts at ``now``.

        An extraction is due an interval after the last one started (at once if that is
        past, or if there was none); an unfinished compaction is resumed at once.
        """
        interval = dt.timedelta(seconds=table.extraction_interval_seconds)
        next_extraction = now
        if last.extraction_started is not None:
            next_extraction = min(last.extraction_started + interval, now + interval)
        return cls(
            table=table,
            next_extraction=next_extraction,
            last_compaction=last.compaction_started,
            compaction_unfinished=last.compaction_unfinished,
            next_compaction_attempt=now,
            last_verify=last.verified,
            next_verify_attempt=now,
        )

    def due(self, action: Action, now: dt.datetime) -> bool:
        if action is Action.EXTRACTION:
            return now >= self.next_extraction
        if action is Action.VERIFY:
            return self.verify_due(now)
        return self.compaction_due(now)

    def verify_due(self, now: dt.datetime) -> bool:
        """A verify may start now: inside its window (if set), ``every`` after the last
        verify (with a window and no ``every``: once per opening of the window)."""
        schedule = self.table.verify
        if schedule is None:
            return False
        if self.next_verify_attempt is not None and now < self.next_verify_attempt:
            return False
        if schedule.window is not None and not schedule.window.contains(now):
            return False
        return _due_since(self.last_verify, schedule.window, schedule.every_seconds, now)

    def verify_ran(self, started: dt.datetime, *, completed: bool) -> None:
        """A verify attempt started at ``started`` ended; one that did not complete (lock,
        failure) is tried again after the retry interval."""
        schedule = self.table.verify
        assert schedule is not None
        if completed:
            self.last_verify = started
            self.next_verify_attempt = started
        else:
            self.next_verify_attempt = started + dt.timedelta(seconds=schedule.retry_seconds)

    def compaction_due(self, now: dt.datetime) -> bool:
        """A compaction may start now.

        An unfinished run is resumed at once, inside its window or not (its diversion is
        in place until it finishes). Otherwise: inside the window (if one is set), and
        ``every`` after the last completed run started (with a window and no ``every``:
        once per opening of the window).
        """
        schedule = self.table.compaction
        if schedule is None or now < self.next_compaction_attempt:
            return False
        if self.compaction_unfinished:
            return True
        if schedule.window is not None and not schedule.window.contains(now):
            return False
        return _due_since(self.last_compaction, schedule.window, schedule.every_seconds, now)

    def overdue(self, action: Action, now: dt.datetime) -> dt.timedelta:
        """How long a due action has waited (the most overdue runs first)."""
        since = (
            self.next_extraction if action is Action.EXTRACTION else self.next_compaction_attempt
        )
        if action is Action.VERIFY:
            since = self.next_verify_attempt or now
        return now - since

    def extraction_ran(self, started: dt.datetime) -> None:
        """An extraction attempt started at ``started`` ended (whatever its outcome): the
        next one is an interval later."""
        self.next_extraction = started + dt.timedelta(
            seconds=self.table.extraction_interval_seconds
        )

    def compaction_ran(self, started: dt.datetime, *, completed: bool, unfinished: bool) -> None:
        """A compaction attempt started at ``started`` ended.

        ``completed``: a run finished (the next follows the schedule); otherwise (failed,
        nothing to compact, lock held) the next attempt waits the retry interval.
        ``unfinished``: a run is left open (resumed at the next attempt).
        """
        schedule = self.table.compaction
        assert schedule is not None
        self.compaction_unfinished = unfinished
        if completed:
            self.last_compaction = started
            self.next_compaction_attempt = started
        else:
            self.next_compaction_attempt = started + dt.timedelta(seconds=schedule.retry_seconds)


def due_runs(
    schedules: list[TableSchedule],
    now: dt.datetime,
    busy: set[tuple[str, Action]],
    free: int,
) -> list[tuple[TableSchedule, Action]]:
    """Up to ``free`` runs due at ``now``, most overdue first, none already running.

    A table's extraction and verify never run together (a verify extracts first, under the
    same lock): the one not chosen waits for the other to end.
    """
    candidates = [
        (schedule, action)
        for schedule in schedules
        for action in Action
        if (schedule.table.key, action) not in busy and schedule.due(action, now)
    ]
    candidates.sort(key=lambda item: item[0].overdue(item[1], now), reverse=True)
    chosen: list[tuple[TableSchedule, Action]] = []
    taken = set(busy)
    for schedule, action in candidates:
        if len(chosen) >= free:
            break
        if any((schedule.table.key, other) in taken for other in _EXCLUSIVE.get(action, ())):
            continue
        chosen.append((schedule, action))
        taken.add((schedule.table.key, action))
    return chosen


_EXCLUSIVE = {
    Action.EXTRACTION: (Action.VERIFY,),
    Action.VERIFY: (Action.EXTRACTION,),
}
"""Actions of one table that must not run at the same time."""


def _due_since(
    last: dt.datetime | None, window: Window | None, every_seconds: float | None, now: dt.datetime
) -> bool:
    """Due again after ``last`` (inside the window, checked by the caller): ``every`` after
    it, or with a window and no ``every``, once per opening of the window."""
    if last is None:
        return True
    if every_seconds is not None:
        return now >= last + dt.timedelta(seconds=every_seconds)
    assert window is not None  # the configuration has one of the two
    return last < window.opened_at(now)
