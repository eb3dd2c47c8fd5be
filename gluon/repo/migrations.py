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
    """``ALTER TABLE ... ADD`` each of ``names`` (as ``models`` declares it) that ``table``
    lacks: a repository created after the column was declared already has it, since table
    creation in an earlier migration uses the current model."""
    present = {column["name"] for column in sa.inspect(connection).get_columns(table.name)}
    preparer = connection.dialect.identifier_preparer
    for name in names:
        if name in present:
            continue
        column = f"{preparer.quote(name)} {table.c[name].type.compile(dialect=connection.dialect)}"
        if connection.dialect.name == "oracle":
            column = f"({column})"
        connection.exec_driver_sql(f"ALTER TABLE {preparer.quote(table.name)} ADD {column}")


def _add_shipped_seq(connection: sa.Connection) -> None:
    _add_missing_columns(connection, models.incremental_state, "shipped_seq")


ENABLEMENT_SCOPED = ("incremental_state", "extraction_runs", "compaction_runs", "obsolete_objects")
"""Tables whose rows belong to one enablement of incremental update (migration 6)."""


def _enablement_ids(connection: sa.Connection) -> None:
    """Give every enabled table an enablement; its runs and kept objects since it was enabled
    belong to it. Unfinished compaction runs of earlier enablements are marked abandoned:
    resuming one would delete the current enablement's changes."""
    models.enablements.create(connection, checkfirst=True)
    for table in ENABLEMENT_SCOPED:
        _add_missing_columns(connection, models.metadata.tables[table], "enablement_id")
    state = models.incremental_state
    rows = connection.execute(
        sa.select(state.c.table_key, state.c.method, state.c.enabled_at, state.c.updated_at).where(
            state.c.enablement_id.is_(None)
        )
    ).all()
    for table_key, method, enabled_at, updated_at in rows:
        since = enabled_at or updated_at
        inserted = connection.execute(
            models.enablements.insert().values(
                table_key=table_key, method=method, started_at=since, enabled_at=enabled_at
            )
        ).inserted_primary_key
        assert inserted is not None
        enablement_id = int(inserted[0])
        connection.execute(
            state.update().where(state.c.table_key == table_key).values(enablement_id=enablement_id)
        )
        for runs, started in (
            (models.extraction_runs, models.extraction_runs.c.started_at),
            (models.compaction_runs, models.compaction_runs.c.started_at),
            (models.obsolete_objects, models.obsolete_objects.c.retained_at),
        ):
            connection.execute(
                runs.update()
                .where(runs.c.table_key == table_key, started >= since)
                .values(enablement_id=enablement_id)
            )
    runs = models.compaction_runs
    connection.execute(
        runs.update()
        .where(runs.c.enablement_id.is_(None), runs.c.status.in_(("running", "waiting", "failed")))
        .values(
            status="abandoned",
            finished_at=dt.datetime.now(dt.UTC).replace(tzinfo=None),
            message="abandoned: it belonged to an earlier enablement of incremental update",
        )
    )


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
    (6, "enablements: runs, snapshots and kept objects belong to one enabling", _enablement_ids),
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
