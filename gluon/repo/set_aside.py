"""Repository records of changes set aside: moved out of the changelog because the lake
cannot take a value of theirs (``gluon.extract.set_aside``).

Each record holds what the change was (operation, key, every value as the source printed
it), which column's value the lake refused and why, and when and by whom it was set aside.
Records stay (status, the report and the service's metrics count them) until the table is
offloaded again from scratch.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from gluon.faults import repository_write
from gluon.repo import models
from gluon.repo.common import Converted, RecordMapping

SAMPLE = 5
"""Records a summary lists (the repository holds them all)."""


def _json(values: dict[str, Any]) -> str:
    return json.dumps(values, default=str, sort_keys=True)


@dataclass(frozen=True, slots=True)
class SetAsideChange:
    """One change set aside."""

    gl_seq: int
    op: str
    key: dict[str, str | None]
    row: dict[str, str | None]
    column_name: str
    value_kind: str
    installation_id: str
    set_by: str
    set_at: dt.datetime


SET_ASIDE = RecordMapping(
    SetAsideChange,
    key=Converted("key_json", load=json.loads, dump=_json),
    row=Converted("row_json", load=json.loads, dump=_json),
)
"""Rows of ``set_aside_changes`` <-> :class:`SetAsideChange` (table and enablement are the key)."""


@dataclass(slots=True)
class SetAsideSummary:
    """The changes set aside of one table: how many, and the latest few."""

    count: int = 0
    latest: list[SetAsideChange] = field(default_factory=list)
    last_set_at: dt.datetime | None = None


class SetAsideChanges:
    """Reads and writes ``set_aside_changes``."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @repository_write("record_set_aside")
    def record(
        self, table_key: str, enablement_id: int, changes: Sequence[SetAsideChange]
    ) -> list[SetAsideChange]:
        """Record ``changes`` once each (by ``gl_seq``); return those that were new.

        Idempotent: a set-aside re-run after a crash between this record and the changelog
        delete records nothing twice.
        """
        if not changes:
            return []
        table = models.set_aside_changes
        with self.engine.begin() as connection:
            known = set(self._seqs(connection, table_key, enablement_id))
            new = [change for change in changes if change.gl_seq not in known]
            if new:
                connection.execute(
                    table.insert(),
                    [
                        {
                            "table_key": table_key,
                            "enablement_id": enablement_id,
                            **SET_ASIDE.to_row(c),
                        }
                        for c in new
                    ],
                )
        return new

    def seqs(self, table_key: str, enablement_id: int) -> set[int]:
        """The ``gl_seq`` values set aside in this enablement."""
        with self.engine.connect() as connection:
            return set(self._seqs(connection, table_key, enablement_id))

    @staticmethod
    def _seqs(connection: sa.Connection, table_key: str, enablement_id: int) -> list[int]:
        table = models.set_aside_changes
        return [
            int(seq)
            for (seq,) in connection.execute(
                sa.select(table.c.gl_seq).where(
                    table.c.table_key == table_key, table.c.enablement_id == enablement_id
                )
            )
        ]

    def summary(self, table_key: str) -> SetAsideSummary:
        """How many changes of the table were set aside, and the latest few."""
        table = models.set_aside_changes
        with self.engine.connect() as connection:
            count = connection.execute(
                sa.select(sa.func.count()).where(table.c.table_key == table_key)
            ).scalar_one()
            rows = connection.execute(
                sa.select(table)
                .where(table.c.table_key == table_key)
                .order_by(table.c.set_at.desc(), table.c.gl_seq.desc())
                .limit(SAMPLE)
            ).mappings()
            latest = [SET_ASIDE.from_row(row) for row in rows]
        return SetAsideSummary(
            count=int(count),
            latest=latest,
            last_set_at=latest[0].set_at if latest else None,
        )

    def count(self, table_key: str) -> int:
        """How many changes of the table were set aside."""
        table = models.set_aside_changes
        with self.engine.connect() as connection:
            return int(
                connection.execute(
                    sa.select(sa.func.count()).where(table.c.table_key == table_key)
                ).scalar_one()
            )
