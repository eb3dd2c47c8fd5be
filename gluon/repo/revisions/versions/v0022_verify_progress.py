"""The verify in progress, one row a table, so a rerun after a kill resumes (revision 0022).

Revision ID: 0022
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0022"
down_revision = "0018"


def upgrade() -> None:
    create_table_if_missing(
        "verify_progress",
        sa.Column("table_key", sa.String(300), primary_key=True),
        sa.Column("taken_at", sa.String(300), nullable=False),
        sa.Column("saved_at", sa.DateTime, nullable=False),
        sa.Column("checkpoint", sa.Text, nullable=False),
    )
