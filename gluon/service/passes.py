"""The service's runs as the worker pool takes them: one run, or the extractions of the
members of a database's shared slot in a row, from one decoding (issue 33 item 4).

Every member of a shared slot that extracts alone decodes the slot up to its own horizon:
N members due in a pass decoded the same WAL N times. When the scheduler picks a member's
extraction, it takes with it every other member that is not running and is due, or due
within half its interval (so the members' runs line up after one pass, and stay lined up:
each is next due an interval after the pass started), up to :data:`MOST_IN_A_PASS` in all;
the worker runs them one after the other inside ``shared_pass.one_decoding`` (the first
decodes, the others replay it). Each
member's run is its own extraction (its lock, run row, Delta commit, position saved and
slot confirmed), so each is reported, counted and scheduled as if it had run alone.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

from gluon.service.schedule import Action, TableSchedule

Run = tuple[TableSchedule, Action]

MOST_IN_A_PASS = 50
"""Members extracted in a row from one decoding, at most (a bound, not a batch): each
decoding more makes the server decode the database's WAL again, which costs more than a
pass's length adds to its last members' lag (40 members 8 a pass: lag p99 27-53 s, against
12 s in one pass; bench/README.md)."""


def in_passes(
    chosen: list[Run],
    schedules: list[TableSchedule],
    busy: set[tuple[str, Action]],
    shares_a_stream: Mapping[str, bool],
    now: dt.datetime,
) -> list[list[Run]]:
    """``chosen`` (from ``schedule.due_runs``) as the runs the pool takes: a shared-stream
    member's extraction with its siblings (see the module docstring), anything else alone.

    ``busy``: runs under way (none is taken again); ``shares_a_stream``: tables known to
    read a shared stream (learned from their last extraction: unknown ones run alone).
    """
    chosen_keys = {(schedule.table.key, action) for schedule, action in chosen}
    taken: set[tuple[str, Action]] = set()
    passes: list[list[Run]] = []
    for schedule, action in chosen:
        key = schedule.table.key
        if (key, action) in taken or (
            action is Action.VERIFY and (key, Action.EXTRACTION) in taken
        ):
            continue  # already in a pass (or its extraction is: the verify waits)
        taken.add((key, action))
        group: list[Run] = [(schedule, action)]
        if action is Action.EXTRACTION and shares_a_stream.get(key, False):
            for sibling in schedules:
                if len(group) >= MOST_IN_A_PASS:
                    break
                other = sibling.table.key
                if other == key or not shares_a_stream.get(other, False):
                    continue
                if (
                    any(
                        (other, kind) in busy or (other, kind) in taken
                        for kind in (Action.EXTRACTION, Action.VERIFY)
                    )
                    or (other, Action.VERIFY) in chosen_keys
                ):
                    continue
                if not _due_soon(sibling, now):
                    continue
                group.append((sibling, Action.EXTRACTION))
                taken.add((other, Action.EXTRACTION))
        passes.append(group)
    return passes


def _due_soon(schedule: TableSchedule, now: dt.datetime) -> bool:
    """Due, or due within half its extraction interval."""
    half = dt.timedelta(seconds=schedule.table.extraction_interval_seconds / 2)
    return now >= schedule.next_extraction - half
