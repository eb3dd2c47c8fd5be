"""The merge mode of each enabled table, chosen at enable (revision 0011).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import add_column_if_missing

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    add_column_if_missing(
        "incremental_state",
        sa.Column("merge_mode", sa.String(20), server_default="DEFERRED"),
    )
