"""When the oldest change each extraction shipped was captured (the lake's latency).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import add_column_if_missing

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    add_column_if_missing("extraction_runs", sa.Column("oldest_change_at", sa.DateTime))
