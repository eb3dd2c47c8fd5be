"""Retained Delta versions (revision 0016): a base table keeps one path for life, so what a
compaction retains of it (``--incremental-retain-obsolete-objects``, the pre-compaction
snapshot) is a version of that table, recorded so status names it and vacuum keeps its files.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import add_column_if_missing

revision = "0016"
# 0015 is reserved for another change: whichever merges second chains after the other.
down_revision = "0015"


def upgrade() -> None:
    add_column_if_missing("obsolete_objects", sa.Column("delta_version", sa.Integer))
