"""Which runs the service's pool takes together (gluon.service.passes): a shared-slot
member's extraction with its siblings that are due soon, nothing else grouped."""

from __future__ import annotations

import datetime as dt

import pytest

from gluon.naming import TableRef
from gluon.service import passes
from gluon.service.config import TableConfig, VerifySchedule
from gluon.service.passes import in_passes
from gluon.service.schedule import Action, LastRuns, TableSchedule, due_runs

T0 = dt.datetime(2026, 11, 27, 12, 0, 0)
INTERVAL = 60.0


def schedule(name: str, last_run_ago: float | None, *, verify: bool = False) -> TableSchedule:
    checks = VerifySchedule(None, 1, 1, None) if verify else None
    config = TableConfig(TableRef.parse(name), INTERVAL, 1000, None, verify=checks)
    started = None if last_run_ago is None else T0 - dt.timedelta(seconds=last_run_ago)
    return TableSchedule.start(config, LastRuns(extraction_started=started), T0)


def keys(passes: list[list[tuple[TableSchedule, Action]]]) -> list[list[str]]:
    return [[f"{s.table.key}:{a.value}" for s, a in runs] for runs in passes]


def test_a_member_takes_its_siblings_due_now_or_within_half_an_interval() -> None:
    member = schedule("S.M1", 90)  # due
    due = schedule("S.M2", 60)  # due now
    soon = schedule("S.M3", 40)  # due in 20 s: under half an interval
    later = schedule("S.M4", 10)  # due in 50 s
    alone = schedule("S.C1", 90)  # not of a shared stream
    schedules = [member, due, soon, later, alone]
    shares = {"S.M1": True, "S.M2": True, "S.M3": True, "S.M4": True, "S.C1": False}
    chosen = due_runs(schedules, T0, set(), 2)
    assert keys(in_passes(chosen, schedules, set(), shares, T0)) == [
        ["S.M1:extraction", "S.M2:extraction", "S.M3:extraction"],
        ["S.C1:extraction"],
    ]


def test_running_or_unknown_tables_and_other_actions_run_alone() -> None:
    member, running, unknown = schedule("S.M1", 90), schedule("S.M2", 90), schedule("S.M3", 90)
    schedules = [member, running, unknown]
    busy = {("S.M2", Action.EXTRACTION)}
    shares = {"S.M1": True, "S.M2": True}  # s.m3 never ran here: not known yet
    chosen = due_runs(schedules, T0, busy, 2)
    assert keys(in_passes(chosen, schedules, busy, shares, T0)) == [
        ["S.M1:extraction"],
        ["S.M3:extraction"],
    ]
    assert keys(in_passes(chosen, schedules, busy, {}, T0)) == keys([[item] for item in chosen])


def test_a_sibling_chosen_on_its_own_or_verifying_is_not_taken_twice() -> None:
    first, second = schedule("S.M1", 120), schedule("S.M2", 90)
    verifying = schedule("S.M3", None, verify=True)
    schedules = [first, second, verifying]
    shares = {key: True for key in ("S.M1", "S.M2", "S.M3")}
    chosen = [(first, Action.EXTRACTION), (second, Action.EXTRACTION), (verifying, Action.VERIFY)]
    assert keys(in_passes(chosen, schedules, set(), shares, T0)) == [
        ["S.M1:extraction", "S.M2:extraction"],
        ["S.M3:verify"],
    ]
    busy_verify = {("S.M2", Action.VERIFY)}
    chosen = [(first, Action.EXTRACTION)]
    assert keys(in_passes(chosen, schedules, busy_verify, shares, T0)) == [
        ["S.M1:extraction", "S.M3:extraction"]
    ]


def test_a_pass_takes_at_most_its_share_of_members(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(passes, "MOST_IN_A_PASS", 2)
    schedules = [schedule(f"S.M{number}", 90) for number in range(5)]
    shares = {item.table.key: True for item in schedules}
    chosen = due_runs(schedules, T0, set(), 3)  # the second is in the first's pass
    assert keys(in_passes(chosen, schedules, set(), shares, T0)) == [
        ["S.M0:extraction", "S.M1:extraction"],
        ["S.M2:extraction", "S.M3:extraction"],
    ]
