"""The source side of the stateful lifecycle test: one table under DML, and its model.

``LifecycleSource`` runs DML on the application table or the updatable view
of a real SQLite or PostgreSQL database and keeps three plain dicts keyed by
the row's key (``None`` is a key too, for PostgreSQL's nullable ``UNIQUE NULLS NOT
DISTINCT`` key):

* ``app``: the application table;
* ``pending``: what the lake's user view must show once every captured change is
  extracted;
* ``lake``: what the user view must show now.

Which DML is captured (and therefore changes ``pending``) is the method's
business; the caller says so with ``captured=``.

The table has one of the :data:`SHAPES`: an integer key or a composite
(integer, text) one, plain or keyword names, an ordinary table or (PostgreSQL) a
declaratively partitioned one. Every name is quoted in the test's own SQL.
"""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import sqlalchemy as sa

CENT = decimal.Decimal("0.01")
Key = int | tuple[int, str] | None
"""An integer key, a composite (integer, text) one, or NULL (the nullable key column)."""
Row = tuple[Key, str | None, str | None]
Model = dict[Key, Row]

FIRST_NEW_ID = 100
"""Rows inserted by the test get ids from here on (below the chunks not offloaded yet)."""
CHUNK_IDS = ((1000, 1010), (1010, 1020))
"""Id ranges of the rows a partially offloaded table offloads later, one increment each."""
CODES = ("north", "south", "δ east", "West")
"""The text part of a composite key (a space, non-ASCII, mixed case): a key change either
gives the row a new integer or moves it to the next code (another LIST partition)."""


def quoted(name: str) -> str:
    """``name`` as a quoted identifier (SQLite and PostgreSQL alike)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class Shape:
    """How the lifecycle table is made: its names, its key and its partitioning."""

    label: str
    table: str
    key: tuple[str, ...]
    """The key columns: the integer one first, then (composite) the text one."""
    name: str
    amount: str
    schema: str | None = None
    """The schema (PostgreSQL; SQLite is always ``main``), None: ``app``."""
    partitioning: Literal["RANGE", "LIST"] | None = None
    """PostgreSQL declarative partitioning: RANGE on the integer key (its upper range
    HASH-partitioned again: two levels), or LIST on the composite key's text part."""

    @property
    def composite(self) -> bool:
        return len(self.key) > 1

    @property
    def nullable(self) -> bool:
        """Whether the key may be a nullable unique column (one integer, no partitions:
        a NULL has no RANGE partition to go to)."""
        return not self.composite and self.partitioning is None

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.key, self.name, self.amount)

    def schema_in(self, dialect: str) -> str:
        return "main" if dialect == "sqlite" else (self.schema or "app")

    def key_of(self, values: Mapping[str, Any]) -> Key:
        """The key of a row whose column names are lower-cased."""
        first = values[self.key[0].lower()]
        if self.composite:
            return (int(first), str(values[self.key[1].lower()]))
        return None if first is None else int(first)

    def key_values(self, key: Key) -> dict[str, Any]:
        """Bind parameters ``k0``, ``k1``... for :meth:`where`."""
        parts = key if isinstance(key, tuple) else (key,)
        return {f"k{i}": part for i, part in enumerate(parts)}

    def where(self, key: Key) -> str:
        if key is None:
            return f"{quoted(self.key[0])} IS NULL"
        return " AND ".join(f"{quoted(column)} = :k{i}" for i, column in enumerate(self.key))

    def new_key(self, number: int) -> Key:
        return (number, CODES[number % len(CODES)]) if self.composite else number

    def moved_key(self, key: Key, number: int) -> Key:
        """A fresh key for the row ``key``: ``number``, or (composite, every other time)
        the same integer with the next code."""
        if isinstance(key, tuple) and number % 2:
            return (key[0], CODES[(CODES.index(key[1]) + 1) % len(CODES)])
        return self.new_key(number)


PLAIN = Shape("plain", "items", ("id",), "name", "amount")
COMPOSITE = Shape("composite", "items", ("id", "code"), "name", "amount")
KEYWORDS = Shape("keywords", "order", ("user",), "group", "from", schema="select")
RANGE_PARTITIONED = Shape("range", "items", ("id",), "name", "amount", partitioning="RANGE")
LIST_PARTITIONED = Shape("list", "items", ("id", "code"), "name", "amount", partitioning="LIST")
SHAPES = (PLAIN, COMPOSITE, KEYWORDS, RANGE_PARTITIONED, LIST_PARTITIONED)


def shapes_for(dialect: str) -> tuple[Shape, ...]:
    return tuple(shape for shape in SHAPES if dialect == "postgresql" or not shape.partitioning)


def canonical(values: Mapping[str, Any] | sa.RowMapping, shape: Shape = PLAIN) -> Row:
    """One row as comparable values: (key, name, amount as a 2-decimal string)."""
    lowered = {str(key).lower(): value for key, value in dict(values).items()}
    amount = lowered[shape.amount.lower()]
    if amount is not None:
        text = repr(amount) if isinstance(amount, float) else str(amount)
        amount = str(decimal.Decimal(text).quantize(CENT))
    return (shape.key_of(lowered), lowered[shape.name.lower()], amount)


def sort_key(key: Key) -> tuple[bool, int, str]:
    if isinstance(key, tuple):
        return (False, *key)
    return (key is None, key or 0, "")


def show(model: Model) -> str:
    return "\n".join(f"    {model[key]}" for key in sorted(model, key=sort_key))


@dataclass
class LifecycleSource:
    dialect: str
    url: str
    shape: Shape
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
    """The updatable view, quoted, while the method has one and the table is enabled."""

    def __post_init__(self) -> None:
        self.engine = sa.create_engine(self.url)

    @property
    def schema(self) -> str:
        return self.shape.schema_in(self.dialect)

    @property
    def table(self) -> str:
        """The application table, quoted: for the test's SQL and for ``-t``."""
        return f"{quoted(self.schema)}.{quoted(self.shape.table)}"

    @property
    def key(self) -> str:
        """The table's key in gluon's repository."""
        return f"{self.schema.upper()}.{self.shape.table.upper()}"

    @property
    def user_view(self) -> str:
        """The lake's user view (lower-case names), quoted for the lake's SQL."""
        return f"`{self.schema.lower()}`.`{self.shape.table.lower()}`"

    @property
    def null_keys(self) -> bool:
        """Whether a row may have a NULL key (a nullable key gluon accepts: PostgreSQL's)."""
        return self.nullable_key and self.dialect == "postgresql"

    def create(self, rows: int = 12) -> None:
        """The table with keys 1..rows (offloaded first) and, when partial, the later chunks."""
        with self.engine.begin() as db:
            if self.dialect == "postgresql":
                db.execute(sa.text(f"CREATE SCHEMA IF NOT EXISTS {quoted(self.schema)}"))
            for statement in self._create_statements():
                db.execute(sa.text(statement))
        for number in range(1, rows + 1):
            row = (self.shape.new_key(number), f"row {number}", "1.25")
            self._write_insert(self.table, row)
            self.app[row[0]] = self.lake[row[0]] = row
        if self.partial:
            for low, high in CHUNK_IDS:
                chunk: Model = {}
                for number in range(low, low + 4):
                    row = (self.shape.new_key(number), f"chunk {number}", "2.50")
                    self._write_insert(self.table, row)
                    self.app[row[0]] = chunk[row[0]] = row
                column = self.shape.key[0]
                predicate = (
                    f"column({column}) >= numeric({low}) and column({column}) < numeric({high})"
                )
                self.chunks.append((predicate, chunk))
        self.pending = dict(self.lake)

    def _create_statements(self) -> list[str]:
        shape, table = self.shape, self.table
        first, *rest = (quoted(column) for column in shape.key)
        columns = [
            f"{first} INTEGER{'' if self.null_keys else ' NOT NULL'}",
            *(f"{column} VARCHAR(20) NOT NULL" for column in rest),
            f"{quoted(shape.name)} VARCHAR(40)",
            f"{quoted(shape.amount)} NUMERIC(12,2)",
        ]
        key = ", ".join(quoted(column) for column in shape.key)
        constraint = f"PRIMARY KEY ({key})"
        if self.nullable_key:
            # gluon refuses a key column that allows NULL unless the source keeps NULL one key
            # value (PostgreSQL 15+); on SQLite the key is a NOT NULL unique column instead.
            constraint = f"UNIQUE {'NULLS NOT DISTINCT ' if self.null_keys else ''}({key})"
        create = f"CREATE TABLE {table} ({', '.join(columns)}, {constraint})"
        if shape.partitioning is None:
            return [create]

        def partition(suffix: str, parent: str = table) -> str:
            name = f"{quoted(self.schema)}.{quoted(shape.table + suffix)}"
            return f"CREATE TABLE {name} PARTITION OF {parent}"

        if shape.partitioning == "RANGE":
            high = f"{quoted(self.schema)}.{quoted(shape.table + '_high')}"
            return [
                f"{create} PARTITION BY RANGE ({first})",
                f"{partition('_low')} FOR VALUES FROM (MINVALUE) TO ({FIRST_NEW_ID})",
                f"{partition('_high')} FOR VALUES FROM ({FIRST_NEW_ID}) TO (MAXVALUE) "
                f"PARTITION BY HASH ({first})",
                *(
                    f"{partition(f'_high_{r}', high)} FOR VALUES WITH (MODULUS 2, REMAINDER {r})"
                    for r in (0, 1)
                ),
            ]
        code = rest[0]
        return [
            f"{create} PARTITION BY LIST ({code})",
            f"{partition('_ns')} FOR VALUES IN ('{CODES[0]}', '{CODES[1]}')",
            f"{partition('_east')} FOR VALUES IN ('{CODES[2]}')",
            f"{partition('_other')} DEFAULT",
        ]

    @property
    def first_predicate(self) -> str:
        return f"column({self.shape.key[0]}) < numeric({CHUNK_IDS[0][0]})"

    # -- DML --------------------------------------------------------------------------------

    def _write_insert(self, target: str, row: Row) -> None:
        with self.engine.begin() as db:
            self._insert(db, target, row)

    def _insert(self, db: sa.Connection, target: str, row: Row) -> None:
        names = ", ".join(quoted(column) for column in self.shape.columns)
        keys = self.shape.key_values(row[0])
        values = ", ".join([*(f":{name}" for name in keys), ":name", ":amount"])
        db.execute(
            sa.text(f"INSERT INTO {target} ({names}) VALUES ({values})"),
            {**keys, "name": row[1], "amount": row[2]},
        )

    def rows_of(self, target: str) -> Model:
        names = ", ".join(quoted(column) for column in self.shape.columns)
        with self.engine.connect() as db:
            result = db.execute(sa.text(f"SELECT {names} FROM {target}")).mappings()
            return {row[0]: row for row in (canonical(item, self.shape) for item in result)}

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

    def offloaded_rows(self) -> Model:
        """The application table's rows, but those of the increments not offloaded yet."""
        return {key: row for key, row in self.app.items() if not self._waiting(key)}

    def row_in(self, target: str, key: Key) -> Row:
        row = self.rows_of(target).get(key)
        assert row is not None, f"{key} vanished from {target}"
        return row

    def insert(self, target: str, name: str | None, amount: str | None, *, null_key: bool) -> Row:
        key: Key = None if null_key else self.shape.new_key(self.next_id)
        if not null_key:
            self.next_id += 1
        row = (key, name, amount)
        self._write_insert(target, row)
        return row

    def update(self, target: str, key: Key, name: str | None, amount: str | None) -> Row:
        shape = self.shape
        assignments = f"{quoted(shape.name)} = :name, {quoted(shape.amount)} = :amount"
        with self.engine.begin() as db:
            db.execute(
                sa.text(f"UPDATE {target} SET {assignments} WHERE {shape.where(key)}"),
                {"name": name, "amount": amount, **shape.key_values(key)},
            )
        return (key, name, amount)

    def noop_update(self, target: str, key: Key) -> None:
        name = quoted(self.shape.name)
        with self.engine.begin() as db:
            db.execute(
                sa.text(f"UPDATE {target} SET {name} = {name} WHERE {self.shape.where(key)}"),
                self.shape.key_values(key),
            )

    def change_key(self, target: str, key: Key) -> Row:
        """Give the row ``key`` a new key; return its new image."""
        shape = self.shape
        before = self.row_in(target, key)
        new = shape.moved_key(key, self.next_id)
        self.next_id += 1
        moved = {f"new{i}": part for i, part in enumerate(shape.key_values(new).values())}
        assignments = ", ".join(f"{quoted(column)} = :new{i}" for i, column in enumerate(shape.key))
        with self.engine.begin() as db:
            db.execute(
                sa.text(f"UPDATE {target} SET {assignments} WHERE {shape.where(key)}"),
                {**moved, **shape.key_values(key)},
            )
        return (new, before[1], before[2])

    def delete(self, target: str, key: Key) -> None:
        with self.engine.begin() as db:
            db.execute(
                sa.text(f"DELETE FROM {target} WHERE {self.shape.where(key)}"),
                self.shape.key_values(key),
            )

    def truncate(self, refill: list[tuple[str | None, str | None]]) -> list[Row]:
        """TRUNCATE the application table and insert ``refill`` rows in the same
        transaction; return the inserted rows."""
        rows: list[Row] = []
        with self.engine.begin() as db:
            db.execute(sa.text(f"TRUNCATE {self.table}"))
            for name, amount in refill:
                rows.append((self.shape.new_key(self.next_id), name, amount))
                self.next_id += 1
                self._insert(db, self.table, rows[-1])
        return rows
