"""Changes an insert-only table did not apply: duplicate keys, uncaptured DML (numbered
migration 7).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    create_table_if_missing(
        "rejected_changes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300), nullable=False),
        sa.Column("enabled_at", sa.DateTime, nullable=False),
        sa.Column("gl_seq", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.String(30), nullable=False),
        sa.Column("key_json", sa.Text, nullable=False),
        sa.Column("row_json", sa.Text),
        sa.Column("recorded_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("table_key", "enabled_at", "gl_seq"),
    )
