"""Compaction runs, their steps and retained obsolete objects (numbered migration 3).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    create_table_if_missing(
        "compaction_runs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300), nullable=False, index=True),
        sa.Column("method", sa.String(30), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("current_step", sa.String(40)),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("options_json", sa.Text, nullable=False),
        sa.Column("compacted_partition", sa.Integer),
        sa.Column("new_partition", sa.Integer),
        sa.Column("changes", sa.BigInteger),
        sa.Column("snapshot_json", sa.Text),
        sa.Column("progress_json", sa.Text),
        sa.Column("message", sa.Text),
    )
    create_table_if_missing(
        "compaction_steps",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer, nullable=False, index=True),
        sa.Column("step", sa.String(40), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("detail", sa.Text),
    )
    create_table_if_missing(
        "obsolete_objects",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300), nullable=False, index=True),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("name", sa.String(300), nullable=False),
        sa.Column("location", sa.Text),
        sa.Column("retained_at", sa.DateTime, nullable=False),
        sa.Column("compaction_run_id", sa.Integer),
    )
