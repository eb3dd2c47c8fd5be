"""Read-only repository queries the status commands need beyond ``gluon.repo``'s own."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from gluon.repo import Repository, models
from gluon.repo.incremental import of_enablement
from gluon.states import ExtractionStatus

# Extraction run statuses.
SUCCESS = ExtractionStatus.SUCCESS
FAILED = ExtractionStatus.FAILED
INTERRUPTED = ExtractionStatus.INTERRUPTED
RUNNING = ExtractionStatus.RUNNING


@dataclass(frozen=True, slots=True)
class ExtractionTotals:
    """Every extraction run of one table, summed up."""

    runs: int = 0
    succeeded: int = 0
    failed: int = 0
    interrupted: int = 0
    rows_written: int = 0
    max_seq: int | None = None
    """The highest ``gl_seq`` a run recorded (None: no run recorded one)."""
    last_success_at: dt.datetime | None = None
    first_started_at: dt.datetime | None = None


def extraction_totals(
    repo: Repository, table_key: str, enablement_id: int | None = None
) -> ExtractionTotals:
    """Counts by status, rows shipped, and the latest successful finish of ``table_key``."""
    runs = models.extraction_runs
    is_status = {
        name: sa.case((runs.c.status == name, 1), else_=0)
        for name in (
            SUCCESS,
            FAILED,
            INTERRUPTED,
        )
    }
    query = sa.select(
        sa.func.count(runs.c.id),
        sa.func.sum(is_status[SUCCESS]),
        sa.func.sum(is_status[FAILED]),
        sa.func.sum(is_status[INTERRUPTED]),
        sa.func.sum(sa.case((runs.c.status == SUCCESS, runs.c.rows_written), else_=0)),
        sa.func.max(runs.c.max_seq),
        sa.func.max(sa.case((runs.c.status == SUCCESS, runs.c.finished_at), else_=None)),
        sa.func.min(runs.c.started_at),
    ).where(runs.c.table_key == table_key, *of_enablement(runs, enablement_id))
    with repo.engine.connect() as connection:
        row = connection.execute(query).one()
    return ExtractionTotals(
        runs=int(row[0] or 0),
        succeeded=int(row[1] or 0),
        failed=int(row[2] or 0),
        interrupted=int(row[3] or 0),
        rows_written=int(row[4] or 0),
        max_seq=None if row[5] is None else int(row[5]),
        last_success_at=row[6],
        first_started_at=row[7],
    )


def last_extraction_with(repo: Repository, table_key: str, status: str) -> int | None:
    """The id of the latest extraction run of ``table_key`` with ``status``, if any."""
    runs = models.extraction_runs
    query = sa.select(sa.func.max(runs.c.id)).where(
        runs.c.table_key == table_key, runs.c.status == status
    )
    with repo.engine.connect() as connection:
        found = connection.execute(query).scalar()
    return None if found is None else int(found)


def compaction_count(
    repo: Repository, table_key: str, enablement_id: int | None = None
) -> dict[str, int]:
    """Compaction runs of ``table_key`` by status."""
    runs = models.compaction_runs
    query = (
        sa.select(runs.c.status, sa.func.count(runs.c.id))
        .where(runs.c.table_key == table_key, *of_enablement(runs, enablement_id))
        .group_by(runs.c.status)
    )
    with repo.engine.connect() as connection:
        return {str(status): int(count) for status, count in connection.execute(query)}
