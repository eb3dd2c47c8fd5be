"""Increments of partially offloaded tables (numbered migration 4).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    create_table_if_missing(
        "offload_increments",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300), nullable=False, index=True),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column("predicate", sa.Text, nullable=False),
        sa.Column("boundary", sa.Text),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("rows", sa.BigInteger),
        sa.Column("offloaded_at", sa.DateTime),
    )
