"""The verify in progress per table (``verify_progress``): what a rerun after a kill skips."""

from __future__ import annotations

import sqlalchemy as sa

from gluon.faults import repository_write
from gluon.repo import models
from gluon.repo.common import now


class VerifyProgressStore:
    """Reads and writes ``verify_progress``: one checkpoint (JSON text) a table, valid while
    the lake's extraction state is still ``taken_at``."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @repository_write("save_verify_progress")
    def save(self, table_key: str, taken_at: str, checkpoint: str) -> None:
        table = models.verify_progress
        with self.engine.begin() as connection:
            connection.execute(sa.delete(table).where(table.c.table_key == table_key))
            connection.execute(
                sa.insert(table).values(
                    table_key=table_key, taken_at=taken_at, saved_at=now(), checkpoint=checkpoint
                )
            )

    def load(self, table_key: str, taken_at: str) -> str | None:
        """The checkpoint saved at ``taken_at``, or None (none, or the lake moved since)."""
        table = models.verify_progress
        with self.engine.connect() as connection:
            row = connection.execute(
                sa.select(table.c.taken_at, table.c.checkpoint).where(
                    table.c.table_key == table_key
                )
            ).first()
        if row is None or row.taken_at != taken_at:
            return None
        return str(row.checkpoint)

    @repository_write("clear_verify_progress")
    def clear(self, table_key: str) -> None:
        table = models.verify_progress
        with self.engine.begin() as connection:
            connection.execute(sa.delete(table).where(table.c.table_key == table_key))
