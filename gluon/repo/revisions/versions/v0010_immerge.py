"""The merge mode of each enabled table, chosen at enable (numbered migration 10).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import add_column_if_missing

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    add_column_if_missing(
        "incremental_state",
        sa.Column("merge_mode", sa.String(20), server_default="DEFERRED"),
    )
