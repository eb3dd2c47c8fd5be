"""How far behind its source each table's lake is, for the service's gauges.

The one place the service reads lag: the same figures as status (``gluon.status``: the
backlog, the age of the oldest pending change, the last source-to-lake latency), read
through one source connection per refresh, plus the time since the last extraction.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from gluon.repo import OffloadedTable, Repository
from gluon.status.changelog_counter import ChangelogCounter


@dataclass(frozen=True, slots=True)
class TableLag:
    backlog: int | None
    """Changes captured and not yet shipped (None: unknown, e.g. the source is unreachable)."""
    seconds_since_extraction: float | None
    """Since the last successful extraction finished (None: none yet)."""
    oldest_pending_seconds: float | None = None
    """Age of the oldest change not yet in the lake (None: not known)."""
    last_latency_seconds: float | None = None
    """Commit in the source to visible in the lake, for the last extraction (None: not known)."""
    set_aside: int | None = None
    """Changes set aside out of the changelog because the lake could not take them."""
    verify_differences: int | None = None
    """Keys the latest ``gluon verify`` found differing (None: never verified)."""
    seconds_since_verify: float | None = None
    """Since the latest ``gluon verify`` (None: never verified)."""


def table_lag(
    repo: Repository, record: OffloadedTable, counter: ChangelogCounter, at: dt.datetime
) -> TableLag:
    """The lag figures of ``record`` at ``at`` (naive UTC); read only."""
    state = repo.incremental.get_state(record.table_key)
    set_aside = repo.set_aside.count(record.table_key)
    verified = repo.verify_runs.latest(record.table_key)
    differences = None if verified is None else verified.differences
    since_verify = (
        None if verified is None else max((at - verified.verified_at).total_seconds(), 0.0)
    )
    if state is None:
        return TableLag(
            None,
            None,
            set_aside=set_aside,
            verify_differences=differences,
            seconds_since_verify=since_verify,
        )
    backlog = counter.backlog(record, state, repo)
    measured = counter.lag(repo, state, backlog)
    last = repo.incremental.extraction_totals(record.table_key, state.enablement_id).last_success_at
    return TableLag(
        backlog.rows,
        None if last is None else max((at - last).total_seconds(), 0.0),
        measured.oldest_pending_age_seconds,
        measured.last_latency_seconds,
        set_aside,
        differences,
        since_verify,
    )
