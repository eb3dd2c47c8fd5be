"""The source side of the stateful lifecycle test: one ``items`` table under DML, and its model.

``LifecycleSource`` runs DML on the application table or the updatable view
of a real SQLite or PostgreSQL database and keeps three plain dicts keyed by
``id`` (``None`` is a key too, for PostgreSQL's nullable ``UNIQUE NULLS NOT DISTINCT`` key):

* ``app``: the application table;
* ``pending``: what the lake's user view must show once every captured change is
  extracted;
* ``lake``: what the user view must show now.

Which DML is captured (and therefore changes ``pending``) is the method's
business; the caller says so with ``captured=``.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass, field
from typing import Any, Literal

import sqlalchemy as sa

CENT = decimal.Decimal("0.01")
Key = int | None
Row = tuple[Key, str | None, str | None]
Model = dict[Key, Row]

FIRST_NEW_ID = 100
"""Rows inserted by the test get ids from here on (below the chunks not offloaded yet)."""
CHUNK_IDS = ((1000, 1010), (1010, 1020))
"""Id ranges of the rows a partially offloaded table offloads later, one increment each."""


def canonical(values: dict[str, Any] | sa.RowMapping) -> Row:
    """One row as comparable values: (id, name, amount as a 2-decimal string)."""
    lowered = {str(key).lower(): value for key, value in dict(values).items()}
    amount = lowered["amount"]
    if amount is not None:
        text = repr(amount) if isinstance(amount, float) else str(amount)
        amount = str(decimal.Decimal(text).quantize(CENT))
    key = lowered["id"]
    return (None if key is None else int(key), lowered["name"], amount)


def sort_key(key: Key) -> tuple[bool, int]:
    return (key is None, key or 0)


def show(model: Model) -> str:
    return "\n".join(f"    {model[key]}" for key in sorted(model, key=sort_key))


@dataclass
class LifecycleSource:
    dialect: str
    url: str
    schema: str
    nullable_key: bool
    partial: bool
    engine: sa.Engine = field(init=False)
    app: Model = field(default_factory=dict)
    pending: Model = field(default_factory=dict)
    lake: Model = field(default_factory=dict)
    chunks: list[tuple[str, Model]] = field(default_factory=list)
    """Increments not offloaded yet: (predicate, rows), in order."""
    next_id: int = FIRST_NEW_ID
    view: str | None = None

    def __post_init__(self) -> None:
        self.engine = sa.create_engine(self.url)

    @property
    def table(self) -> str:
        return f"{self.schema}.items"

    @property
    def null_keys(self) -> bool:
        """Whether a row may have a NULL key (a nullable key gluon accepts: PostgreSQL's)."""
        return self.nullable_key and self.dialect == "postgresql"

    def create(self, rows: int = 12) -> None:
        """The table with ids 1..rows (offloaded first) and, when partial, the later chunks."""
        key = "INTEGER PRIMARY KEY"
        if self.nullable_key:
            # gluon refuses a key column that allows NULL unless the source keeps NULL one key
            # value (PostgreSQL 15+); on SQLite the key is a NOT NULL unique column instead.
            key = (
                "INTEGER UNIQUE NULLS NOT DISTINCT" if self.null_keys else "INTEGER NOT NULL UNIQUE"
            )
        with self.engine.begin() as db:
            if self.dialect == "postgresql":
                db.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {self.schema}"))
            db.execute(
                sa.text(
                    f"CREATE TABLE {self.table} (id {key}, name VARCHAR(40), amount NUMERIC(12,2))"
                )
            )
        for key_value in range(1, rows + 1):
            self._write_insert(self.table, (key_value, f"row {key_value}", "1.25"))
            self.app[key_value] = self.lake[key_value] = (key_value, f"row {key_value}", "1.25")
        if self.partial:
            for low, high in CHUNK_IDS:
                chunk: Model = {}
                for key_value in range(low, low + 4):
                    row = (key_value, f"chunk {key_value}", "2.50")
                    self._write_insert(self.table, row)
                    self.app[key_value] = chunk[key_value] = row
                predicate = f"column(id) >= numeric({low}) and column(id) < numeric({high})"
                self.chunks.append((predicate, chunk))
        self.pending = dict(self.lake)

    @property
    def first_predicate(self) -> str:
        return f"column(id) < numeric({CHUNK_IDS[0][0]})"

    # -- DML --------------------------------------------------------------------------------

    def _write_insert(self, target: str, row: Row) -> None:
        with self.engine.begin() as db:
            db.execute(
                sa.text(f"INSERT INTO {target} (id, name, amount) VALUES (:id, :name, :amount)"),
                {"id": row[0], "name": row[1], "amount": row[2]},
            )

    @staticmethod
    def _where(key: Key) -> str:
        return "id IS NULL" if key is None else "id = :key"

    def rows_of(self, target: str) -> Model:
        with self.engine.connect() as db:
            result = db.execute(sa.text(f"SELECT id, name, amount FROM {target}")).mappings()
            return {row[0]: row for row in (canonical(item) for item in result)}

    def pick(self, target: str, index: int, *, with_null: bool = True) -> Key | Literal["none"]:
        """The ``index``-th key (modulo) of ``target``; ``"none"`` when it is empty.

        Rows of the chunks not offloaded yet are never touched: their changes would
        precede their offload.
        """
        keys = sorted(
            (
                key
                for key in self.rows_of(target)
                if (with_null or key is not None) and not self._waiting(key)
            ),
            key=sort_key,
        )
        return keys[index % len(keys)] if keys else "none"

    def _waiting(self, key: Key) -> bool:
        return any(key in rows for _, rows in self.chunks)

    def row_in(self, target: str, key: Key) -> Row:
        row = self.rows_of(target).get(key)
        assert row is not None, f"{key} vanished from {target}"
        return row

    def insert(self, target: str, name: str | None, amount: str | None, *, null_key: bool) -> Row:
        key: Key = None if null_key else self.next_id
        if not null_key:
            self.next_id += 1
        row = (key, name, amount)
        self._write_insert(target, row)
        return row

    def update(self, target: str, key: Key, name: str | None, amount: str | None) -> Row:
        with self.engine.begin() as db:
            db.execute(
                sa.text(
                    f"UPDATE {target} SET name = :name, amount = :amount WHERE {self._where(key)}"
                ),
                {"name": name, "amount": amount, "key": key},
            )
        return (key, name, amount)

    def noop_update(self, target: str, key: Key) -> None:
        with self.engine.begin() as db:
            db.execute(
                sa.text(f"UPDATE {target} SET name = name WHERE {self._where(key)}"), {"key": key}
            )

    def change_key(self, target: str, key: Key) -> Row:
        """Give the row ``key`` a new id; return its new image."""
        before = self.row_in(target, key)
        new = self.next_id
        self.next_id += 1
        with self.engine.begin() as db:
            db.execute(
                sa.text(f"UPDATE {target} SET id = :new WHERE {self._where(key)}"),
                {"new": new, "key": key},
            )
        return (new, before[1], before[2])

    def delete(self, target: str, key: Key) -> None:
        with self.engine.begin() as db:
            db.execute(sa.text(f"DELETE FROM {target} WHERE {self._where(key)}"), {"key": key})
