"""Where each PG_LOGICAL table of a database's shared slot stands (revision 0029, issue 33):
the commit position from which it ships, its offload snapshot until that position passes
the snapshot's boundary, and whether it was released from the slot's minimum.

Revision ID: 0029
Revises: 0025
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0029"
down_revision = "0025"


def upgrade() -> None:
    create_table_if_missing(
        "slot_positions",
        sa.Column("table_key", sa.String(300), primary_key=True),
        sa.Column("enablement_id", sa.Integer),
        sa.Column("slot_name", sa.String(64), nullable=False, index=True),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("offload_snapshot", sa.Text),
        sa.Column("snapshot_boundary", sa.BigInteger),
        sa.Column("released_reason", sa.Text),
        sa.Column("updated_at", sa.DateTime, nullable=False),
    )
