"""The ``gl_seq`` ranges of the last batch each extraction run counted (revision 0025): a run
killed after counting a batch but before the source let go of it leaves the batch to the next
run, which must not count it again.

Revision ID: 0025
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa

from gluon.repo.revisions.ddl import add_column_if_missing

revision = "0025"
down_revision = "0022"


def upgrade() -> None:
    add_column_if_missing("extraction_runs", sa.Column("counted_seqs", sa.Text))
