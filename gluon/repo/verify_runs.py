"""Repository records of ``gluon verify`` runs: the latest one per table is what status
shows as "verified"."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from gluon.faults import repository_write
from gluon.repo import models

EQUAL = "equal"
DIFFERENT = "different"


@dataclass(frozen=True, slots=True)
class VerifyRun:
    """One verify of one table."""

    table_key: str
    verified_at: dt.datetime
    result: str
    rows_compared: int
    missing_in_lake: int
    extra_in_lake: int
    different_values: int
    in_flight: int

    @property
    def differences(self) -> int:
        return self.missing_in_lake + self.extra_in_lake + self.different_values


class VerifyRuns:
    """Reads and writes ``verify_runs``."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @repository_write("record_verify")
    def record(self, run: VerifyRun) -> None:
        values = {name: getattr(run, name) for name in VerifyRun.__slots__}
        with self.engine.begin() as connection:
            connection.execute(sa.insert(models.verify_runs).values(**values))

    def latest(self, table_key: str) -> VerifyRun | None:
        table = models.verify_runs
        with self.engine.connect() as connection:
            row = connection.execute(
                sa.select(*(table.c[name] for name in VerifyRun.__slots__))
                .where(table.c.table_key == table_key)
                .order_by(table.c.id.desc())
                .limit(1)
            ).first()
        return None if row is None else VerifyRun(**row._mapping)
