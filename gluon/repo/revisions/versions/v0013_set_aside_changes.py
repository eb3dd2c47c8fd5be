"""Changes the lake could not take, set aside out of the changelog (revision 0013).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    # Made if missing, as every revision since 0009: a repository stamped at an older
    # revision may hold it already.
    create_table_if_missing(
        "set_aside_changes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("table_key", sa.String(300), nullable=False, index=True),
        sa.Column("enablement_id", sa.Integer, nullable=False),
        sa.Column("gl_seq", sa.BigInteger, nullable=False),
        sa.Column("op", sa.String(1), nullable=False),
        sa.Column("key_json", sa.Text, nullable=False),
        sa.Column("row_json", sa.Text, nullable=False),
        sa.Column("column_name", sa.String(128), nullable=False),
        sa.Column("value_kind", sa.String(200), nullable=False),
        sa.Column("installation_id", sa.String(32), nullable=False),
        sa.Column("set_by", sa.String(128), nullable=False),
        sa.Column("set_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("table_key", "enablement_id", "gl_seq"),
    )
