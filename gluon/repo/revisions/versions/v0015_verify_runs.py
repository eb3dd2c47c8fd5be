"""The results of ``gluon verify`` (revision 0015).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    create_table_if_missing(
        "verify_runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300), nullable=False, index=True),
        sa.Column("verified_at", sa.DateTime, nullable=False),
        sa.Column("result", sa.String(20), nullable=False),
        sa.Column("rows_compared", sa.BigInteger, nullable=False),
        sa.Column("missing_in_lake", sa.Integer, nullable=False),
        sa.Column("extra_in_lake", sa.Integer, nullable=False),
        sa.Column("different_values", sa.Integer, nullable=False),
        sa.Column("in_flight", sa.Integer, nullable=False),
    )
