"""Offloaded partition and subpartition names (revision 0014): the native partitions or
subpartitions an increment of ``--partition-names`` / ``--subpartition-names`` offloaded,
so status and the report name them.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import add_column_if_missing

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    add_column_if_missing("offload_increments", sa.Column("names", sa.Text))
