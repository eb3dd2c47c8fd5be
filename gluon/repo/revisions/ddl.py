"""DDL helpers for the frozen revisions.

Revisions 0001-0009 replace numbered migrations that created tables and added columns only
where missing: a repository stamped from its recorded migration number may already hold part
of the next migration's objects (Oracle commits DDL as it runs), so these helpers skip what is
present.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


def create_table_if_missing(name: str, *columns: sa.Column[object] | sa.Constraint) -> None:
    """``op.create_table`` (with the indexes of ``index=True`` columns) unless ``name`` exists."""
    if not sa.inspect(op.get_bind()).has_table(name):
        op.create_table(name, *columns)


def add_column_if_missing(table: str, column: sa.Column[object]) -> None:
    """``op.add_column`` unless ``table`` has a column of that name."""
    present = {item["name"] for item in sa.inspect(op.get_bind()).get_columns(table)}
    if column.name not in present:
        op.add_column(table, column)
