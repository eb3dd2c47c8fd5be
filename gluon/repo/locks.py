"""Table locks recorded in the repository, so nodes sharing one repository exclude each other."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from gluon.faults import repository_write
from gluon.repo import models
from gluon.repo.common import Converted, RecordMapping


@dataclass(frozen=True, slots=True)
class LockRecord:
    """Who holds one lock of one table: the command, its process and host, and since when."""

    command: str
    pid: int
    host: str
    since: dt.datetime


LOCKS = RecordMapping(LockRecord, since=Converted("acquired_at"))
"""Rows of ``table_locks`` <-> :class:`LockRecord` (its table and lock name are the key)."""


class LockRepository:
    """One row per held (table, lock); the primary key makes a second claim fail."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def get(self, table_key: str, lock_name: str) -> LockRecord | None:
        table = models.table_locks
        with self.engine.connect() as connection:
            row = (
                connection.execute(
                    sa.select(table).where(
                        table.c.table_key == table_key, table.c.lock_name == lock_name
                    )
                )
                .mappings()
                .first()
            )
        return None if row is None else LOCKS.from_row(row)

    @repository_write("claim")
    def claim(
        self,
        table_key: str,
        lock_name: str,
        holder: LockRecord,
        *,
        stale: Callable[[LockRecord], bool],
    ) -> LockRecord | None:
        """Record ``holder``; return the record that prevents it (None when claimed).

        A record that ``stale`` judges abandoned (its process died) is replaced; the
        replacement deletes exactly that record, so two claimants cannot both take it over.
        """
        table = models.table_locks
        for _ in range(3):
            try:
                with self.engine.begin() as connection:
                    connection.execute(
                        table.insert().values(
                            table_key=table_key, lock_name=lock_name, **LOCKS.to_row(holder)
                        )
                    )
                return None
            except sa.exc.IntegrityError:
                current = self.get(table_key, lock_name)
                if current is None:
                    continue  # released meanwhile: claim again
                if not stale(current):
                    return current
                self._delete(table_key, lock_name, current)
        return self.get(table_key, lock_name)

    def release(self, table_key: str, lock_name: str, holder: LockRecord) -> None:
        """Delete the record of ``holder`` (only that one: a takeover's record stays)."""
        self._delete(table_key, lock_name, holder)

    def clear(self, table_key: str, lock_name: str) -> LockRecord | None:
        """Delete whatever record holds the lock; return it."""
        current = self.get(table_key, lock_name)
        if current is not None:
            self._delete(table_key, lock_name, current)
        return current

    @repository_write("delete")
    def _delete(self, table_key: str, lock_name: str, holder: LockRecord) -> None:
        table = models.table_locks
        with self.engine.begin() as connection:
            connection.execute(
                table.delete().where(
                    table.c.table_key == table_key,
                    table.c.lock_name == lock_name,
                    table.c.pid == holder.pid,
                    table.c.host == holder.host,
                    table.c.acquired_at == holder.since,
                )
            )
