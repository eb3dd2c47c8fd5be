"""When the service runs what: due times from an injected clock (no sleeps)."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from gluon.compact.options import CompactionOptions
from gluon.naming import TableRef
from gluon.service.config import CompactionSchedule, TableConfig, VerifySchedule
from gluon.service.config_values import Window
from gluon.service.schedule import Action, LastRuns, TableSchedule, due_runs

T0 = dt.datetime(2026, 11, 23, 12, 0, 0)


def table(
    name: str = "s.t",
    interval: float = 60,
    *,
    window: Window | None = None,
    every: float | None = None,
    retry: float = 300,
) -> TableConfig:
    compaction = None
    if window is not None or every is not None:
        compaction = CompactionSchedule(
            window=window,
            every_seconds=every,
            retry_seconds=retry,
            options=CompactionOptions(table=TableRef.parse(name), wait_minutes=0),
        )
    return TableConfig(TableRef.parse(name), interval, 1000, compaction)


def seconds(value: float) -> dt.timedelta:
    return dt.timedelta(seconds=value)


def test_a_table_never_extracted_is_due_at_once() -> None:
    schedule = TableSchedule.start(table(), LastRuns(), T0)
    assert schedule.due(Action.EXTRACTION, T0)


def test_a_restart_waits_the_rest_of_the_interval_since_the_last_run() -> None:
    schedule = TableSchedule.start(table(interval=60), LastRuns(T0 - seconds(20)), T0)
    assert not schedule.due(Action.EXTRACTION, T0)
    assert not schedule.due(Action.EXTRACTION, T0 + seconds(39))
    assert schedule.due(Action.EXTRACTION, T0 + seconds(40))


def test_an_overdue_table_is_due_at_once_and_a_future_clock_is_bounded() -> None:
    overdue = TableSchedule.start(table(interval=60), LastRuns(T0 - seconds(600)), T0)
    assert overdue.due(Action.EXTRACTION, T0)
    # A last run recorded in the future (another node's clock) waits one interval at most.
    ahead = TableSchedule.start(table(interval=60), LastRuns(T0 + seconds(3600)), T0)
    assert ahead.next_extraction == T0 + seconds(60)


def test_the_next_extraction_is_an_interval_after_the_last_started_whatever_its_outcome() -> None:
    schedule = TableSchedule.start(table(interval=10), LastRuns(), T0)
    schedule.extraction_ran(T0)  # a failure is retried at the next interval, not sooner
    assert not schedule.due(Action.EXTRACTION, T0 + seconds(9))
    assert schedule.due(Action.EXTRACTION, T0 + seconds(10))


def test_no_compaction_without_a_schedule() -> None:
    schedule = TableSchedule.start(table(), LastRuns(), T0)
    assert not schedule.due(Action.COMPACTION, T0 + seconds(10**6))


def test_compaction_starts_only_inside_its_window_once_per_opening() -> None:
    window = Window(dt.time(1, 0), dt.time(3, 0))
    schedule = TableSchedule.start(table(window=window), LastRuns(), T0)
    assert not schedule.due(Action.COMPACTION, T0)  # 12:00
    opened = dt.datetime(2026, 11, 24, 1, 0)
    assert not schedule.due(Action.COMPACTION, opened - seconds(1))
    assert schedule.due(Action.COMPACTION, opened)
    schedule.compaction_ran(opened + seconds(5), completed=True, unfinished=False)
    assert not schedule.due(Action.COMPACTION, opened + seconds(3600))  # done for this window
    assert not schedule.due(Action.COMPACTION, opened + seconds(7200))  # closed at 03:00
    assert schedule.due(Action.COMPACTION, opened + dt.timedelta(days=1))


def test_a_window_across_midnight() -> None:
    window = Window(dt.time(23, 0), dt.time(2, 0))
    assert window.contains(dt.datetime(2026, 11, 23, 23, 30))
    assert window.contains(dt.datetime(2026, 11, 24, 1, 59))
    assert not window.contains(dt.datetime(2026, 11, 24, 2, 0))
    assert window.opened_at(dt.datetime(2026, 11, 24, 1, 0)) == dt.datetime(2026, 11, 23, 23, 0)
    last = dt.datetime(2026, 11, 23, 23, 10)
    schedule = TableSchedule.start(table(window=window), LastRuns(compaction_started=last), T0)
    assert not schedule.due(Action.COMPACTION, dt.datetime(2026, 11, 24, 0, 30))
    assert schedule.due(Action.COMPACTION, dt.datetime(2026, 11, 24, 23, 0))


def test_every_counts_from_the_last_completed_compaction_in_the_repository() -> None:
    last = T0 - seconds(3000)
    schedule = TableSchedule.start(table(every=3600), LastRuns(compaction_started=last), T0)
    assert not schedule.due(Action.COMPACTION, T0 + seconds(599))
    assert schedule.due(Action.COMPACTION, T0 + seconds(600))


def test_every_and_window_together() -> None:
    window = Window(dt.time(12, 0), dt.time(13, 0))
    schedule = TableSchedule.start(table(window=window, every=600), LastRuns(), T0)
    assert schedule.due(Action.COMPACTION, T0)
    schedule.compaction_ran(T0, completed=True, unfinished=False)
    assert not schedule.due(Action.COMPACTION, T0 + seconds(599))
    assert schedule.due(Action.COMPACTION, T0 + seconds(600))
    assert not schedule.due(Action.COMPACTION, T0 + seconds(3600))  # the window closed


def test_a_failed_or_empty_attempt_waits_the_retry_interval() -> None:
    schedule = TableSchedule.start(table(every=60, retry=120), LastRuns(), T0)
    schedule.compaction_ran(T0, completed=False, unfinished=False)  # nothing to compact
    assert not schedule.due(Action.COMPACTION, T0 + seconds(119))
    assert schedule.due(Action.COMPACTION, T0 + seconds(120))


def test_an_unfinished_run_is_resumed_at_once_even_outside_its_window() -> None:
    window = Window(dt.time(1, 0), dt.time(2, 0))
    last = LastRuns(compaction_started=T0 - seconds(60), compaction_unfinished=True)
    schedule = TableSchedule.start(table(window=window), last, T0)
    assert schedule.due(Action.COMPACTION, T0)
    schedule.compaction_ran(T0, completed=False, unfinished=True)  # failed again
    assert not schedule.due(Action.COMPACTION, T0 + seconds(299))
    assert schedule.due(Action.COMPACTION, T0 + seconds(300))
    schedule.compaction_ran(T0 + seconds(300), completed=True, unfinished=False)
    assert not schedule.due(Action.COMPACTION, T0 + seconds(600))


def test_due_runs_take_the_most_overdue_first_up_to_the_free_slots_and_skip_running_ones() -> None:
    schedules = [
        TableSchedule.start(table(f"s.t{number}", 60), LastRuns(T0 - seconds(60 + number)), T0)
        for number in range(5)
    ]
    chosen = due_runs(schedules, T0, busy={("S.T4", Action.EXTRACTION)}, free=2)
    assert [(schedule.table.key, action) for schedule, action in chosen] == [
        ("S.T3", Action.EXTRACTION),
        ("S.T2", Action.EXTRACTION),
    ]
    assert due_runs(schedules, T0, busy=set(), free=0) == []


def verified(window: Window | None = None, every: float | None = None) -> TableConfig:
    return replace(table(), verify=VerifySchedule(window, every, 300, None))


def test_no_verify_without_a_schedule() -> None:
    assert not TableSchedule.start(table(), LastRuns(), T0).due(Action.VERIFY, T0)


def test_verify_starts_only_inside_its_window_once_per_opening() -> None:
    window = Window(dt.time(2, 0), dt.time(4, 0))
    schedule = TableSchedule.start(verified(window), LastRuns(), T0)
    assert not schedule.due(Action.VERIFY, T0)  # 12:00, off-peak is 02:00-04:00
    night = dt.datetime(2026, 11, 24, 2, 30)
    assert schedule.due(Action.VERIFY, night)
    schedule.verify_ran(night, completed=True)
    assert not schedule.due(Action.VERIFY, night + seconds(3600))
    assert schedule.due(Action.VERIFY, night + dt.timedelta(days=1))


def test_verify_every_counts_from_the_last_verify_and_retries_after_a_lock() -> None:
    schedule = TableSchedule.start(verified(every=3600), LastRuns(verified=T0 - seconds(600)), T0)
    assert not schedule.due(Action.VERIFY, T0 + seconds(2999))
    assert schedule.due(Action.VERIFY, T0 + seconds(3000))
    schedule.verify_ran(T0 + seconds(3000), completed=False)  # locked: retry, not an hour
    assert not schedule.due(Action.VERIFY, T0 + seconds(3299))
    assert schedule.due(Action.VERIFY, T0 + seconds(3300))


def test_a_verify_does_not_start_while_the_table_is_extracted() -> None:
    [schedule] = [TableSchedule.start(verified(every=60), LastRuns(T0), T0)]
    busy = {("S.T", Action.EXTRACTION)}
    assert due_runs([schedule], T0, busy=busy, free=2) == []
    assert [action for _, action in due_runs([schedule], T0, busy=set(), free=2)] == [Action.VERIFY]


def test_an_extraction_and_a_verify_due_together_are_not_both_started() -> None:
    schedule = TableSchedule.start(verified(every=60), LastRuns(), T0)
    assert len(due_runs([schedule], T0, busy=set(), free=2)) == 1
    assert due_runs([schedule], T0, busy={("S.T", Action.VERIFY)}, free=2) == []
