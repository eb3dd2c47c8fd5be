"""Where each PG_LOGICAL table of a database's shared slot stands (``slot_positions``,
revision 0029; ``gluon.source.publication``).

A table ships the transactions committed at or after its position; the shared slot is
confirmed only to the least position over its tables that are not released. A table being
enabled is held at position 0 from before it joins the publication until its offload
snapshot is taken, so no extraction of another table confirms the slot past a transaction
the new table must ship. A table released from the minimum (it kept more WAL than the
documented bound) keeps its row, with the reason, until it is offloaded again.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa

from gluon.faults import repository_write
from gluon.repo import models
from gluon.repo.common import now, upsert

HELD = 0
"""The position of a table being enabled: the slot must not move past anything."""


@dataclass(frozen=True, slots=True)
class SlotPosition:
    """One table's row of ``slot_positions``."""

    table_key: str
    enablement_id: int | None
    slot_name: str
    position: int
    offload_snapshot: str | None
    snapshot_boundary: int | None
    released_reason: str | None
    updated_at: dt.datetime

    @property
    def held(self) -> bool:
        """The table is being enabled: the slot stays where it is."""
        return self.position == HELD


class SlotPositions:
    """Reads and writes ``slot_positions``."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @repository_write("hold_slot_position")
    def hold(self, table_key: str, enablement_id: int | None, slot_name: str) -> None:
        """Record ``table_key`` as joining ``slot_name``, held at position 0 (a re-run of an
        enable that died holds it again: nothing of it was shipped)."""
        upsert(
            self.engine,
            models.slot_positions,
            table_key,
            {
                "enablement_id": enablement_id,
                "slot_name": slot_name,
                "position": HELD,
                "offload_snapshot": None,
                "snapshot_boundary": None,
                "released_reason": None,
                "updated_at": now(),
            },
        )

    @repository_write("save_slot_position")
    def save(
        self, table_key: str, position: int, snapshot: str | None, boundary: int | None
    ) -> None:
        """Move ``table_key`` to ``position`` (with its offload snapshot and boundary while
        they matter, else None)."""
        table = models.slot_positions
        with self.engine.begin() as connection:
            connection.execute(
                sa.update(table)
                .where(table.c.table_key == table_key)
                .values(
                    position=position,
                    offload_snapshot=snapshot,
                    snapshot_boundary=boundary,
                    updated_at=now(),
                )
            )

    @repository_write("release_slot_position")
    def release(self, table_key: str, reason: str) -> None:
        """Leave ``table_key`` out of the slot's minimum from now on, saying why."""
        table = models.slot_positions
        with self.engine.begin() as connection:
            connection.execute(
                sa.update(table)
                .where(table.c.table_key == table_key)
                .values(released_reason=reason, updated_at=now())
            )

    @repository_write("forget_slot_position")
    def forget(self, table_key: str) -> None:
        """Remove ``table_key``'s row (disabled: it leaves the slot)."""
        table = models.slot_positions
        with self.engine.begin() as connection:
            connection.execute(sa.delete(table).where(table.c.table_key == table_key))

    def get(self, table_key: str) -> SlotPosition | None:
        table = models.slot_positions
        with self.engine.connect() as connection:
            row = connection.execute(sa.select(table).where(table.c.table_key == table_key)).first()
        return None if row is None else SlotPosition(**row._asdict())

    def of_slot(self, slot_name: str) -> list[SlotPosition]:
        """Every table of ``slot_name``, by table key."""
        table = models.slot_positions
        with self.engine.connect() as connection:
            rows = connection.execute(
                sa.select(table).where(table.c.slot_name == slot_name).order_by(table.c.table_key)
            ).all()
        return [SlotPosition(**row._asdict()) for row in rows]
