"""Small helpers every repository module shares."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite


def now() -> dt.datetime:
    """The repository's clock: every timestamp it records is naive UTC."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


KEY = "table_key"
"""The column an upserted table is keyed by (its primary key or a unique constraint)."""


def upsert(engine: sa.Engine, table: sa.Table, key: str, values: dict[str, Any]) -> None:
    """Insert ``values``, or replace the row whose ``table_key`` is ``key``.

    One statement in the dialect's native form, so two nodes sharing the repository that
    save the same new key at once both succeed (the later one wins) instead of one failing
    on the unique key.
    """
    row = {**values, KEY: key}
    with engine.begin() as connection:
        statement = upsert_statement(connection.dialect, table, row)
        if statement is not None:
            connection.execute(statement)
            return
        # Another dialect: update, then insert what was not there.
        updated = connection.execute(table.update().where(table.c[KEY] == key).values(**row))
        if updated.rowcount == 0:
            connection.execute(table.insert().values(**row))


def upsert_statement(
    dialect: sa.Dialect, table: sa.Table, row: dict[str, Any]
) -> sa.Executable | None:
    """The native upsert of ``row`` into ``table`` keyed by ``table_key`` on ``dialect``:
    ``INSERT ... ON CONFLICT DO UPDATE`` (SQLite, PostgreSQL), ``MERGE`` (Oracle); None for
    a dialect without one."""
    changed = [name for name in row if name != KEY]
    if dialect.name in ("sqlite", "postgresql"):
        insert = (sqlite.insert if dialect.name == "sqlite" else postgresql.insert)(table)
        insert = insert.values(**row)
        return insert.on_conflict_do_update(
            index_elements=[table.c[KEY]],
            set_={name: insert.excluded[name] for name in changed},
        )
    if dialect.name == "oracle":
        return _merge(dialect, table, row, changed)
    return None


def _merge(
    dialect: sa.Dialect, table: sa.Table, row: dict[str, Any], changed: list[str]
) -> sa.TextClause:
    """Oracle's ``MERGE``. Values are bound straight into ``SET`` and ``VALUES`` (not selected
    from ``dual``) so text columns bind as CLOBs; the key column, which the ``ON`` clause
    names, cannot be updated."""
    quote = dialect.identifier_preparer.quote

    def bind(name: str) -> str:
        return f":v_{name}"

    names = list(row)
    sql = (
        f"MERGE INTO {quote(table.name)} target USING dual"
        f" ON (target.{quote(KEY)} = {bind(KEY)})"
        " WHEN MATCHED THEN UPDATE SET "
        + ", ".join(f"target.{quote(name)} = {bind(name)}" for name in changed)
        + " WHEN NOT MATCHED THEN INSERT ("
        + ", ".join(quote(name) for name in names)
        + ") VALUES ("
        + ", ".join(bind(name) for name in names)
        + ")"
    )
    return sa.text(sql).bindparams(
        *(sa.bindparam(f"v_{name}", row[name], type_=table.c[name].type) for name in names)
    )
