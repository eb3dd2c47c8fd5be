"""Repository records of what a partially offloaded table has copied so far."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

import sqlalchemy as sa

from gluon.faults import repository_write
from gluon.repo import models
from gluon.repo.common import Converted, RecordMapping, now
from gluon.states import IncrementStatus

PENDING = IncrementStatus.PENDING
DONE = IncrementStatus.DONE


@dataclass(frozen=True, slots=True)
class OffloadIncrement:
    id: int
    table_key: str
    kind: str
    """``predicate``, ``less_than``, ``partitions`` or ``subpartitions``."""
    predicate: str
    """The rows it covers, in gluon's predicate language."""
    boundary: str | None
    """The high-water mark of a ``less_than`` increment (``--less-than-value``)."""
    status: str
    rows: int | None
    offloaded_at: dt.datetime | None
    names: tuple[str, ...] = ()
    """The source partitions (``partitions``) or subpartitions (``subpartitions``) it
    offloaded, as the source names them; empty for the other kinds."""


INCREMENTS = RecordMapping(
    OffloadIncrement,
    names=Converted(
        "names",
        load=lambda text: tuple(json.loads(text)) if text else (),
        dump=lambda names: json.dumps(list(names)) if names else None,
    ),
)
"""Rows of ``offload_increments`` -> :class:`OffloadIncrement`."""


class IncrementRepository:
    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def increments(self, table_key: str) -> list[OffloadIncrement]:
        table = models.offload_increments
        with self.engine.connect() as connection:
            rows = connection.execute(
                sa.select(table).where(table.c.table_key == table_key).order_by(table.c.id)
            ).mappings()
            return [INCREMENTS.from_row(row) for row in rows]

    @repository_write("start_increment")
    def start(
        self,
        table_key: str,
        kind: str,
        predicate: str,
        boundary: str | None,
        names: tuple[str, ...] = (),
    ) -> int:
        """Record a pending increment (or return the pending one with the same predicate)."""
        for increment in self.increments(table_key):
            if increment.status == PENDING and increment.predicate == predicate:
                return increment.id
        table = models.offload_increments
        with self.engine.begin() as connection:
            result = connection.execute(
                table.insert().values(
                    table_key=table_key,
                    kind=kind,
                    predicate=predicate,
                    boundary=boundary,
                    status=PENDING,
                    **INCREMENTS.values(names=names),
                )
            )
            key = result.inserted_primary_key
        assert key is not None
        return int(key[0])

    @repository_write("finish_increment")
    def finish(self, increment_id: int, rows: int) -> None:
        table = models.offload_increments
        with self.engine.begin() as connection:
            connection.execute(
                table.update()
                .where(table.c.id == increment_id)
                .values(status=DONE, rows=rows, offloaded_at=now())
            )

    @repository_write("delete_increments")
    def delete_all(self, table_key: str, *, keep: int | None = None) -> None:
        """Forget a table's increments (all but ``keep``)."""
        table = models.offload_increments
        condition = table.c.table_key == table_key
        if keep is not None:
            condition = condition & (table.c.id != keep)
        with self.engine.begin() as connection:
            connection.execute(table.delete().where(condition))
