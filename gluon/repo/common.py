"""Small helpers every repository module shares."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa


def now() -> dt.datetime:
    """The repository's clock: every timestamp it records is naive UTC."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def upsert(engine: sa.Engine, table: sa.Table, key: str, values: dict[str, Any]) -> None:
    """Insert ``values``, or replace the row whose ``table_key`` is ``key``, in one transaction."""
    with engine.begin() as connection:
        updated = connection.execute(
            table.update().where(table.c.table_key == key).values(**values)
        )
        if updated.rowcount == 0:
            connection.execute(table.insert().values(**values))
