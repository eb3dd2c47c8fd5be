"""Versioned repository migrations, applied in order on first use.

Each migration is a function of a connection inside one transaction; its
number is recorded in ``gluon_schema_version``. Add a migration at the end of
``MIGRATIONS``; never edit one that has shipped.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable

import sqlalchemy as sa

from gluon.repo import models

Migration = tuple[int, str, Callable[[sa.Connection], None]]


def _create(*tables: sa.Table) -> Callable[[sa.Connection], None]:
    def apply(connection: sa.Connection) -> None:
        for table in tables:
            table.create(connection, checkfirst=True)

    return apply


def _create_installation(connection: sa.Connection) -> None:
    models.installation.create(connection, checkfirst=True)
    connection.execute(
        models.installation.insert().values(
            installation_id=uuid.uuid4().hex,
            created_at=dt.datetime.now(dt.UTC).replace(tzinfo=None),
        )
    )


def _add_missing_columns(connection: sa.Connection, table: sa.Table, *names: str) -> None:
    """Add ``names`` (as ``models`` declares them) to an existing ``table``.

    A repository created after the column was declared already has it: table
    creation in an earlier migration uses the current model.
    """
    present = {column["name"] for column in sa.inspect(connection).get_columns(table.name)}
    for name in names:
        if name in present:
            continue
        column_type = table.c[name].type.compile(dialect=connection.dialect)
        connection.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {name} {column_type}"))


def _add_shipped_seq(connection: sa.Connection) -> None:
    _add_missing_columns(connection, models.incremental_state, "shipped_seq")


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
    (5, "table locks held by running commands", _create(models.table_locks)),
    (
        7,
        "changes an insert-only table did not apply (duplicate keys, uncaptured DML)",
        _create(models.rejected_changes),
    ),
    (8, "installation id that marks what gluon creates", _create_installation),
    (9, "highest change sequence shipped per enablement", _add_shipped_seq),
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
