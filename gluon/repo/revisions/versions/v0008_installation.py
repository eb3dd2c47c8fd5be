"""The installation id that marks what gluon creates (numbered migration 8).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

from gluon.repo.common import now
from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    create_table_if_missing(
        "installation",
        sa.Column("installation_id", sa.String(32), primary_key=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )
    installation = sa.table(
        "installation", sa.column("installation_id", sa.String), sa.column("created_at")
    )
    connection = op.get_bind()
    if connection.execute(sa.select(sa.func.count()).select_from(installation)).scalar():
        return
    connection.execute(
        installation.insert().values(installation_id=uuid.uuid4().hex, created_at=now())
    )
