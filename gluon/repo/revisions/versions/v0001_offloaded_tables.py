"""Offloaded tables (numbered migration 1).

Revision ID: 0001
Revises: -
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0001"
down_revision = None


def upgrade() -> None:
    create_table_if_missing(
        "offloaded_tables",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300), nullable=False, unique=True),
        sa.Column("source_dialect", sa.String(30), nullable=False),
        sa.Column("source_schema", sa.String(128), nullable=False),
        sa.Column("source_table", sa.String(128), nullable=False),
        sa.Column("lake_schema", sa.String(128), nullable=False),
        sa.Column("lake_table", sa.String(128), nullable=False),
        sa.Column("base_table", sa.String(300), nullable=False),
        sa.Column("base_path", sa.Text, nullable=False),
        sa.Column("columns_json", sa.Text, nullable=False),
        sa.Column("primary_key_json", sa.Text, nullable=False),
        sa.Column("partitioning_json", sa.Text, nullable=False),
        sa.Column("offload_type", sa.String(20), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("row_count", sa.BigInteger),
        sa.Column("offloaded_at", sa.DateTime),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
