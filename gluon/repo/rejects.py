"""Repository records of changes an insert-only table's extraction did not apply.

An insert-only delta view appends every insert, so extraction keeps out of
the lake (and records here) what would make the lake wrong:

- ``duplicate_key``: an insert whose key the lake already shows (kept with its
  whole row, so nothing is lost);
- ``uncaptured_update`` / ``uncaptured_delete``: an UPDATE or DELETE of the
  application table, which CHANGELOG_INSERT does not apply (kept by old key).

Records stay until the table is offloaded again from scratch (the lake is a
fresh copy of the source then); status and the report show them as needing
attention.
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
from gluon.repo.common import Converted, RecordMapping, now

DUPLICATE_KEY = "duplicate_key"
UNCAPTURED_UPDATE = "uncaptured_update"
UNCAPTURED_DELETE = "uncaptured_delete"
SAMPLE_KEYS = 5
"""Keys listed per reason in messages (the repository holds them all)."""


@dataclass(frozen=True, slots=True)
class RejectedChange:
    gl_seq: int
    reason: str
    key: dict[str, Any]
    row: dict[str, Any] | None = None


@dataclass(slots=True)
class RejectSummary:
    """Rejected changes of one table: how many per reason, and a few of their keys."""

    counts: dict[str, int] = field(default_factory=dict)
    sample_keys: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    last_recorded_at: dt.datetime | None = None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _json(values: dict[str, Any] | None) -> str | None:
    return None if values is None else json.dumps(values, default=str, sort_keys=True)


REJECTED = RecordMapping(
    RejectedChange,
    key=Converted("key_json", load=json.loads, dump=_json),
    row=Converted(
        "row_json", load=lambda text: None if text is None else json.loads(text), dump=_json
    ),
)
"""Rows of ``rejected_changes`` <-> :class:`RejectedChange` (table and enabling are the key)."""


class RejectedChanges:
    """Reads and writes ``rejected_changes``."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @repository_write("record")
    def record(
        self, table_key: str, enabled_at: dt.datetime, changes: Sequence[RejectedChange]
    ) -> list[RejectedChange]:
        """Record ``changes`` once each (by ``gl_seq``); return those that were new.

        Idempotent, so an extraction re-run after a crash records nothing twice.
        """
        if not changes:
            return []
        table = models.rejected_changes
        seqs = [change.gl_seq for change in changes]
        with self.engine.begin() as connection:
            known = {
                int(seq)
                for (seq,) in connection.execute(
                    sa.select(table.c.gl_seq).where(
                        table.c.table_key == table_key,
                        table.c.enabled_at == enabled_at,
                        table.c.gl_seq.between(min(seqs), max(seqs)),
                    )
                )
            }
            new = [change for change in changes if change.gl_seq not in known]
            if new:
                recorded_at = now()
                connection.execute(
                    table.insert(),
                    [
                        {
                            "table_key": table_key,
                            "enabled_at": enabled_at,
                            **REJECTED.to_row(change),
                            "recorded_at": recorded_at,
                        }
                        for change in new
                    ],
                )
        return new

    def summary(self, table_key: str) -> RejectSummary:
        """Counts per reason and the first keys of each (lowest ``gl_seq`` first)."""
        table = models.rejected_changes
        result = RejectSummary()
        with self.engine.connect() as connection:
            rows = connection.execute(
                sa.select(
                    table.c.reason,
                    sa.func.count(),
                    sa.func.max(table.c.recorded_at),
                )
                .where(table.c.table_key == table_key)
                .group_by(table.c.reason)
            ).all()
            for reason, counted, last in rows:
                result.counts[str(reason)] = int(counted)
                if result.last_recorded_at is None or last > result.last_recorded_at:
                    result.last_recorded_at = last
                keys = connection.execute(
                    sa.select(table.c.key_json)
                    .where(table.c.table_key == table_key, table.c.reason == reason)
                    .order_by(table.c.recorded_at, table.c.gl_seq)
                    .limit(SAMPLE_KEYS)
                ).scalars()
                result.sample_keys[str(reason)] = [json.loads(text) for text in keys]
        return result

    def rows(self, table_key: str, reason: str) -> list[dict[str, Any]]:
        """The recorded rows (or keys, for uncaptured DML) of ``reason``, in capture order."""
        table = models.rejected_changes
        with self.engine.connect() as connection:
            found = connection.execute(
                sa.select(table.c.key_json, table.c.row_json)
                .where(table.c.table_key == table_key, table.c.reason == reason)
                .order_by(table.c.recorded_at, table.c.gl_seq)
            ).all()
        return [json.loads(row or key) for key, row in found]

    @repository_write("clear")
    def clear(self, table_key: str) -> int:
        """Forget the table's records (its lake was copied from the source again)."""
        with self.engine.begin() as connection:
            deleted = connection.execute(
                models.rejected_changes.delete().where(
                    models.rejected_changes.c.table_key == table_key
                )
            )
        return int(deleted.rowcount or 0)
