"""The service's checks that found nothing to extract, one row a table (revision 0018).

Revision ID: 0018
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import create_table_if_missing

revision = "0018"
down_revision = "0016"


def upgrade() -> None:
    create_table_if_missing(
        "service_checks",
        sa.Column("table_key", sa.String(300), primary_key=True),
        sa.Column("enablement_id", sa.Integer),
        sa.Column("checked_at", sa.DateTime, nullable=False),
        sa.Column("empty_checks", sa.BigInteger, nullable=False),
    )
