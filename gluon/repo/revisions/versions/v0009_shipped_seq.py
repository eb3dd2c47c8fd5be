"""The highest change sequence shipped per enablement (numbered migration 9).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import add_column_if_missing

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    add_column_if_missing("incremental_state", sa.Column("shipped_seq", sa.BigInteger))
