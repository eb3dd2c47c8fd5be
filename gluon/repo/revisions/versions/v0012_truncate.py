"""TRUNCATE (revision 0012): the highest control partition an extraction shipped a TRUNCATE
to, and the row counts an extraction compared for tables whose capture cannot see one.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import add_column_if_missing

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    add_column_if_missing("incremental_state", sa.Column("truncate_partition", sa.Integer))
    add_column_if_missing("extraction_runs", sa.Column("source_rows", sa.BigInteger))
    add_column_if_missing("extraction_runs", sa.Column("lake_rows", sa.BigInteger))
