"""Table locks held by running commands (numbered migration 5).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    create_table_if_missing(
        "table_locks",
        sa.Column("table_key", sa.String(300), primary_key=True),
        sa.Column("lock_name", sa.String(30), primary_key=True),
        sa.Column("command", sa.String(100), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("acquired_at", sa.DateTime, nullable=False),
    )
