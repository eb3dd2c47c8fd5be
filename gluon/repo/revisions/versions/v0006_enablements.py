"""Enablements: runs, snapshots and kept objects belong to one enabling (numbered
migration 6).

Every enabled table gets an enablement; its runs and kept objects since it was enabled
belong to it. Unfinished compaction runs of earlier enablements are marked abandoned:
resuming one would delete the current enablement's changes.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from gluon.repo.common import now
from gluon.repo.revisions.ddl import add_column_if_missing, create_table_if_missing

revision = "0006"
down_revision = "0005"

ENABLEMENT_SCOPED = ("incremental_state", "extraction_runs", "compaction_runs", "obsolete_objects")
"""Tables whose rows belong to one enablement of incremental update."""


def upgrade() -> None:
    create_table_if_missing(
        "enablements",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300), nullable=False, index=True),
        sa.Column("method", sa.String(30), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("enabled_at", sa.DateTime),
        sa.Column("disabled_at", sa.DateTime),
    )
    for name in ENABLEMENT_SCOPED:
        add_column_if_missing(name, sa.Column("enablement_id", sa.Integer))

    # The tables as this revision left them (frozen: never the live models).
    metadata = sa.MetaData()
    enablements = sa.Table(
        "enablements",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300)),
        sa.Column("method", sa.String(30)),
        sa.Column("started_at", sa.DateTime),
        sa.Column("enabled_at", sa.DateTime),
    )
    state = sa.table(
        "incremental_state",
        sa.column("table_key", sa.String),
        sa.column("method", sa.String),
        sa.column("enabled_at", sa.DateTime),
        sa.column("updated_at", sa.DateTime),
        sa.column("enablement_id", sa.Integer),
    )
    scoped = [
        (
            sa.table(
                name,
                sa.column("table_key", sa.String),
                sa.column(started, sa.DateTime),
                sa.column("enablement_id", sa.Integer),
            ),
            started,
        )
        for name, started in (
            ("extraction_runs", "started_at"),
            ("compaction_runs", "started_at"),
            ("obsolete_objects", "retained_at"),
        )
    ]
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(state.c.table_key, state.c.method, state.c.enabled_at, state.c.updated_at).where(
            state.c.enablement_id.is_(None)
        )
    ).all()
    for table_key, method, enabled_at, updated_at in rows:
        since = enabled_at or updated_at
        inserted = connection.execute(
            enablements.insert().values(
                table_key=table_key, method=method, started_at=since, enabled_at=enabled_at
            )
        ).inserted_primary_key
        if inserted is None:
            raise RuntimeError(f"no id was returned for the enablement of {table_key}")
        enablement_id = int(inserted[0])
        connection.execute(
            state.update().where(state.c.table_key == table_key).values(enablement_id=enablement_id)
        )
        for scoped_table, started in scoped:
            connection.execute(
                scoped_table.update()
                .where(scoped_table.c.table_key == table_key, scoped_table.c[started] >= since)
                .values(enablement_id=enablement_id)
            )
    runs = sa.table(
        "compaction_runs",
        sa.column("status", sa.String),
        sa.column("finished_at", sa.DateTime),
        sa.column("message", sa.Text),
        sa.column("enablement_id", sa.Integer),
    )
    connection.execute(
        runs.update()
        .where(runs.c.enablement_id.is_(None), runs.c.status.in_(("running", "waiting", "failed")))
        .values(
            status="abandoned",
            finished_at=now(),
            message="abandoned: it belonged to an earlier enablement of incremental update",
        )
    )
