"""Incremental update state and extraction runs (numbered migration 2).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    create_table_if_missing(
        "incremental_state",
        sa.Column("table_key", sa.String(300), primary_key=True),
        sa.Column("method", sa.String(30), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("key_columns_json", sa.Text, nullable=False),
        sa.Column("source_objects_json", sa.Text, nullable=False),
        sa.Column("delta_table", sa.String(300), nullable=False),
        sa.Column("delta_path", sa.Text, nullable=False),
        sa.Column("view_generation", sa.Integer, nullable=False),
        sa.Column("active_partition", sa.Integer, nullable=False),
        sa.Column("view_min_partition", sa.Integer, nullable=False),
        sa.Column("requested_partition", sa.Integer),
        sa.Column("requested_at", sa.DateTime),
        sa.Column("acknowledged_partition", sa.Integer),
        sa.Column("acknowledged_at", sa.DateTime),
        sa.Column("last_scn", sa.BigInteger),
        sa.Column("enabled_at", sa.DateTime),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
    create_table_if_missing(
        "extraction_runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300), nullable=False, index=True),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("rows_read", sa.BigInteger),
        sa.Column("rows_written", sa.BigInteger),
        sa.Column("min_seq", sa.BigInteger),
        sa.Column("max_seq", sa.BigInteger),
        sa.Column("control_partition", sa.Integer),
        sa.Column("scn", sa.BigInteger),
        sa.Column("message", sa.Text),
    )
