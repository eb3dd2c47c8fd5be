"""A source table under random DML, and the lake state a user should see.

``Workload`` drives one table (``items``: id, name, amount, updated) in a real
PostgreSQL or SQLite database. Changes go to the application table or, for the
UPDATABLE family, to the updatable view; ``expected`` models what the lake's
user view must show afterwards (the application table plus the patches).
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

CENT = decimal.Decimal("0.01")
Row = tuple[int, str | None, str | None, dt.datetime | None]


def canonical(row: dict[str, Any] | sa.Row[Any]) -> Row:
    """One row as comparable values (amount as a 2-decimal string, naive timestamp)."""
    values = dict(row._mapping) if isinstance(row, sa.Row) else dict(row)
    values = {key.lower(): value for key, value in values.items()}
    amount = values["amount"]
    if amount is not None:
        amount = str(
            decimal.Decimal(repr(amount) if isinstance(amount, float) else amount).quantize(CENT)
        )
    updated = values["updated"]
    if isinstance(updated, str):
        updated = dt.datetime.fromisoformat(updated)
    if isinstance(updated, dt.datetime) and updated.tzinfo is not None:
        updated = updated.replace(tzinfo=None)
    return (int(values["id"]), values["name"], amount, updated)


@dataclass
class Workload:
    engine: sa.Engine
    schema: str
    patch_view: str | None = None
    """Qualified name of the updatable view, for the UPDATABLE family."""
    trigger_captures: bool = True
    """Whether DML on the application table reaches the lake (CHANGELOG family)."""
    inserts_only: bool = False
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    expected: dict[int, Row] = field(default_factory=dict)
    next_id: int = 1

    @property
    def table(self) -> str:
        return f"{self.schema}.items"

    def create(self, rows: int = 20) -> None:
        with self.engine.begin() as db:
            db.execute(
                sa.text(
                    f"CREATE TABLE {self.table} (id INTEGER PRIMARY KEY, name VARCHAR(40), "
                    "amount NUMERIC(12,2), updated TIMESTAMP)"
                )
            )
        for _ in range(rows):
            self._insert(self.table, capture=True)

    # -- the application table and the model ------------------------------------------------

    def source_rows(self, target: str | None = None) -> dict[int, Row]:
        """Rows of the application table (or of ``target``, e.g. the updatable view)."""
        with self.engine.connect() as db:
            result = db.execute(sa.text(f"SELECT * FROM {target or self.table}"))
            rows = [canonical(row) for row in result]
        return {row[0]: row for row in rows}

    def _values(self, key: int) -> dict[str, Any]:
        # Amounts travel as text: sqlite3 cannot bind Decimal, and text keeps them exact.
        amount = None if self.rng.random() < 0.1 else str(self.rng.randint(-99999, 999999) * CENT)
        name = (
            None
            if self.rng.random() < 0.1
            else self.rng.choice(["alpha", "beta", "gamma", "δέλτα", "", "x" * 40])
        )
        updated = dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=self.rng.randint(0, 10**13))
        return {"id": key, "name": name, "amount": amount, "updated": updated}

    def _insert(self, target: str, *, capture: bool) -> None:
        values = self._values(self.next_id)
        self.next_id += 1
        with self.engine.begin() as db:
            db.execute(
                sa.text(f"INSERT INTO {target} VALUES (:id, :name, :amount, :updated)"), values
            )
        if capture:
            self.expected[values["id"]] = canonical(values)

    def _existing(self, target: str) -> int | None:
        keys = sorted(self.source_rows(target))
        return self.rng.choice(keys) if keys else None

    def _update(self, target: str, *, capture: bool, change_key: bool) -> None:
        key = self._existing(target)
        if key is None:
            return
        values = self._values(key)
        if change_key:
            values["id"] = self.next_id
            self.next_id += 1
        with self.engine.begin() as db:
            db.execute(
                sa.text(
                    f"UPDATE {target} SET id = :id, name = :name, amount = :amount, "
                    "updated = :updated WHERE id = :old"
                ),
                {**values, "old": key},
            )
        if capture:
            self.expected.pop(key, None)
            self.expected[values["id"]] = canonical(values)

    def _delete(self, target: str, *, capture: bool) -> None:
        key = self._existing(target)
        if key is None:
            return
        with self.engine.begin() as db:
            db.execute(sa.text(f"DELETE FROM {target} WHERE id = :id"), {"id": key})
        if capture:
            self.expected.pop(key, None)

    def _multi_update(self, target: str, *, capture: bool) -> None:
        modulus = self.rng.randint(3, 7)
        before = self.source_rows(target)
        with self.engine.begin() as db:
            db.execute(sa.text(f"UPDATE {target} SET name = 'bulk' WHERE id % {modulus} = 0"))
        if capture:
            # Each changed row is captured as its full image; rows already 'bulk' are no-ops.
            for key, row in before.items():
                if key % modulus == 0 and row[1] != "bulk":
                    self.expected[key] = (row[0], "bulk", row[2], row[3])

    def round(self, operations: int) -> None:
        """Run ``operations`` random DML statements (each its own transaction)."""
        for _ in range(operations):
            self._one()

    def _one(self) -> None:
        patch = self.patch_view is not None and (
            not self.trigger_captures or self.rng.random() < 0.3
        )
        if patch:
            target, capture = str(self.patch_view), True
            # Patches through the view never change the application table.
        else:
            target, capture = self.table, self.trigger_captures
        choices = (
            ["insert"] if self.inserts_only else ["insert", "update", "key", "delete", "multi"]
        )
        action = self.rng.choice(choices)
        if action == "insert":
            self._insert(target, capture=capture)
        elif action == "update":
            self._update(target, capture=capture, change_key=False)
        elif action == "key":
            self._update(target, capture=capture, change_key=True)
        elif action == "delete":
            self._delete(target, capture=capture)
        else:
            self._multi_update(target, capture=capture)
