"""Versioned repository migrations, applied in order on first use.

Each migration is a function of a connection inside one transaction; its
number is recorded in ``gluon_schema_version``. Add a migration at the end of
``MIGRATIONS``; never edit one that has shipped.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import sqlalchemy as sa

from gluon.repo import models

Migration = tuple[int, str, Callable[[sa.Connection], None]]


def _create(*tables: sa.Table) -> Callable[[sa.Connection], None]:
    def apply(connection: sa.Connection) -> None:
        for table in tables:
            table.create(connection, checkfirst=True)

    return apply


MIGRATIONS: list[Migration] = [
    (1, "offloaded tables", _create(models.offloaded_tables)),
    (
        2,
        "incremental update state and extraction runs",
        _create(models.incremental_state, models.extraction_runs),
    ),
    (
        3,
        "compaction runs, their steps and retained obsolete objects",
        _create(models.compaction_runs, models.compaction_steps, models.obsolete_objects),
    ),
    (4, "increments of partially offloaded tables", _create(models.offload_increments)),
    (
        7,
        "changes an insert-only table did not apply (duplicate keys, uncaptured DML)",
        _create(models.rejected_changes),
    ),
]


def current_version(connection: sa.Connection) -> int:
    """The highest applied migration (0 for an empty repository)."""
    if not sa.inspect(connection).has_table(models.schema_version.name):
        return 0
    value = connection.execute(sa.select(sa.func.max(models.schema_version.c.version))).scalar()
    return int(value or 0)


def migrate(engine: sa.Engine) -> int:
    """Apply every pending migration; return the resulting version."""
    with engine.begin() as connection:
        models.schema_version.create(connection, checkfirst=True)
    version = 0
    for number, description, apply in MIGRATIONS:
        with engine.begin() as connection:
            version = current_version(connection)
            if number <= version:
                continue
            apply(connection)
            connection.execute(
                models.schema_version.insert().values(
                    version=number, description=description, applied_at=dt.datetime.now(dt.UTC)
                )
            )
            version = number
    return version
